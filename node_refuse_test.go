package zklock

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseChildRefusesLookalikes: names one character away from a format
// zklock knows are not read as that format. A protected name without its
// `_c_`, or with a sequence ZooKeeper never writes (a plus sign, a sign
// anywhere but first), would otherwise sort into the queue as a
// participant of ours or Curator's.
func TestParseChildRefusesLookalikes(t *testing.T) {
	u := "0f8fad5b-d9cb-469f-a165-70867728950e"
	hex := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		ok   bool // ends in a sequence: an unknown node, refused with ErrUnknownNode
	}{
		{u + "-lock-0000000001", true},                // no _c_
		{"_x_" + u + "-lock-0000000001", true},        // another prefix
		{"c_" + u + "-lock-0000000001", true},         // a prefix cut short
		{"_c_" + u + "-lock-+000000001", false},       // a signed sequence: ParseInt reads it, ZooKeeper never writes it
		{"_c_" + u + "-lock-0000-00001", false},       // a sign inside
		{hex + "__lock__+000000003", false},           // kazoo's, signed
		{"_c_" + hex + "-lock-+000000005", false},     // zk.Lock's, signed
		{"_c_" + u + "-lock-+2147483647", true},       // a plus before ten digits: of no name zklock knows
		{"_c_" + u + "-lock-0000000001x", false},      // trailing text
		{"_c_" + u + "-lock-00000000 1", false},       // a space
		{"_c_" + u[:35] + "-lock-0000000001", true},   // an id one short
		{"x" + hex[1:] + "__lock__0000000003", true},  // kazoo's id, but its first character is no hex digit
		{"_c_x" + hex[1:] + "-lock-0000000005", true}, // zk.Lock's likewise
		{"0000000005", true},                          // a sequence alone, of no name
		{hex + "0000000003", true},                    // kazoo's id and a sequence, but no __lock__ between
	} {
		ch, ok, err := parseChild(tc.name)
		if ok != tc.ok || (ok && !errors.Is(err, ErrUnknownNode)) || (!ok && err != nil) {
			t.Errorf("parseChild(%q) = %+v, %v, %v; want ok %v and, if ok, ErrUnknownNode", tc.name, ch, ok, err, tc.ok)
		}
	}
	for _, s := range []string{"+000000001", "+0000000001", "0000-00001", "-+00000001", "000000001-", "00000000+1", "--00000001"} {
		if n, ok := parseSeq(s); ok {
			t.Errorf("parseSeq(%q) = %d: a sequence ZooKeeper never writes", s, n)
		}
	}
	// The sequences it does write, at the edges of each form.
	for s, want := range map[string]int32{
		"0000000000": 0, "2147483647": 2147483647, "-000000001": -1, "-999999999": -999999999,
		"-1000000000": -1000000000, "-2147483648": -2147483648,
	} {
		if n, ok := parseSeq(s); !ok || n != want {
			t.Errorf("parseSeq(%q) = %d, %v; want %d", s, n, ok, want)
		}
	}
}

// TestSemaphoreSizeBounds: a recorded size is a number of leases from 1 to
// the largest int32; 0, negatives and anything larger are no size.
func TestSemaphoreSizeBounds(t *testing.T) {
	for data, want := range map[string]int{"1": 1, "2": 2, "2147483647": 2147483647, " 3\n": 3, "+4": 4} {
		if n, ok := SemaphoreSize([]byte(data)); !ok || n != want {
			t.Errorf("SemaphoreSize(%q) = %d, %v; want %d", data, n, ok, want)
		}
	}
	for _, data := range []string{"0", "-0", "-1", "-2147483648", "2147483648", "9223372036854775807", "", "x", strings.Repeat("9", 30)} {
		if n, ok := SemaphoreSize([]byte(data)); ok {
			t.Errorf("SemaphoreSize(%q) = %d, want no size", data, n)
		}
	}
}

// TestSortChildrenAcrossZero: ZooKeeper's sequence counter, once wrapped,
// counts up through -1 to 0 (a signed 32-bit cversion): a node made at -1
// is ahead of one made at 0, whatever order the names come in.
func TestSortChildrenAcrossZero(t *testing.T) {
	created := []int32{-2, -1, 0, 1}
	var names []string
	for i, seq := range created {
		names = append(names, fmt.Sprintf("_c_%s-lock-%010d", uuidN(i), seq))
	}
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}} {
		var in []string
		for _, i := range order {
			in = append(in, names[i])
		}
		kids, err := sortChildren(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, childNames(kids), names, "creation order across zero, read as ", order)
	}
}
