package zklock

// SharedStateForTest returns what an RWMutex made WithSharedReads has open
// for new reads to join: how many reads wait for it to be granted, its
// node once granted, and whether new reads may still join it (false also
// when there is none).
func SharedStateForTest(rw *RWMutex) (joined int, node string, open bool) {
	s := rw.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.cur
	if cl == nil {
		return 0, "", false
	}
	if cl.base != nil {
		node = cl.base.node
	}
	return len(cl.joined), node, !cl.closed
}
