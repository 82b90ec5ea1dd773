package zklock

import (
	"encoding/binary"
	"errors"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/zkrecipes/zklock/internal/session"
)

// pythonInt is the grammar of Python's int() on a str, once the
// surrounding white space is gone and every decimal digit is ASCII: a
// sign, then digits with single underscores between them.
var pythonInt = regexp.MustCompile(`^[+-]?[0-9](_?[0-9])*$`)

// toASCIIDigits maps the decimal digits (Nd) of every script to ASCII, by
// the ranges of Unicode's Nd table: each range is a run of digits 0 to 9.
func toASCIIDigits(s string) string {
	return strings.Map(func(r rune) rune {
		for _, rg := range unicode.Nd.R16 {
			if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
				return '0' + (r-rune(rg.Lo))%10
			}
		}
		for _, rg := range unicode.Nd.R32 {
			if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
				return '0' + (r-rune(rg.Lo))%10
			}
		}
		return r
	}, s)
}

// FuzzSemaphoreSize feeds the readers of a semaphore's recorded size any
// data: parseSize, which reads a path's data as kazoo's Semaphore does
// (int(data.decode("utf-8")): a kazoo-layout semaphore refuses a path whose
// recorded size differs from its own; zklock's layout reads it only as the
// size of lease nodes whose names carry none), and sharedCount.store, which reads a Curator SharedCount (a
// 4-byte big-endian int, as SharedCount.fromBytes). Neither panics; a
// number is read exactly when the data is one, with its value (0, which no
// size equals, beyond an int64); every size written round-trips; a count of
// fewer than 4 bytes is refused with ErrInvalidArgument and leaves the
// count as it was.
func FuzzSemaphoreSize(f *testing.F) {
	for _, s := range []string{
		"3", "1", "2147483647", "\u0663_\u0664", "\U0001D7D8\U0001D7E1", "0", "-1", " 7\n", "+5", "1_000", "1__0", "_1", "1_", "--1", "+-1", "",
		" ", "x", "0x10", "1e3", "3.0", "٣", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "00012", "\t\v\f\r 42 \u00a0\u0085",
		"\x00\x00\x00\x05", "\xff\xff\xff\xff", "\x80\x00\x00\x00extra", "\x00\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := parseSize(data)
		trimmed := toASCIIDigits(strings.TrimFunc(string(data), unicode.IsSpace))
		if want := pythonInt.MatchString(trimmed); ok != want {
			t.Fatalf("parseSize(%q) = %d, %v; want ok %v", data, n, ok, want)
		}
		if ok {
			v, good := new(big.Int).SetString(strings.ReplaceAll(trimmed, "_", ""), 10)
			if !good {
				t.Fatalf("parseSize(%q) read a number math/big cannot", data)
			}
			want := int64(0)
			if v.IsInt64() {
				want = v.Int64()
			}
			if n != want {
				t.Fatalf("parseSize(%q) = %d, want %d", data, n, want)
			}
		}

		// Every size, as written by kazoo (str) and by us (strconv), and
		// in the other forms Python reads, round-trips.
		var size int64
		if len(data) >= 8 {
			size = int64(binary.BigEndian.Uint64(data))
		}
		for _, s := range []string{strconv.FormatInt(size, 10), " " + strconv.FormatInt(size, 10) + "\n", plus(size)} {
			if got, ok := parseSize([]byte(s)); !ok || got != size {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", s, got, ok, size)
			}
		}

		// A Curator SharedCount.
		c := &sharedCount{path: "/count", seed: 9}
		_, err := c.store(data, session.Stat{Czxid: 1, Version: 1})
		switch {
		case len(data) < 4:
			if !errors.Is(err, ErrInvalidArgument) || c.get() != 9 {
				t.Fatalf("store(%q) = %v, count %d; want ErrInvalidArgument and the seed", data, err, c.get())
			}
		case err != nil || c.get() != int(int32(binary.BigEndian.Uint32(data))):
			t.Fatalf("store(%q) = %v, count %d", data, err, c.get())
		}
		// An older read does not replace a newer one.
		written := make([]byte, 4)
		binary.BigEndian.PutUint32(written, uint32(size))
		before := c.get()
		if _, err := c.store(written, session.Stat{Czxid: 1, Version: 0}); err != nil || (len(data) >= 4 && c.get() != before) {
			t.Fatalf("an older count replaced a newer one: %d, then %d (%v)", before, c.get(), err)
		}
		if _, err := c.store(written, session.Stat{Czxid: 1, Version: 2}); err != nil || c.get() != int(int32(size)) {
			t.Fatalf("store of %d read %d (%v)", int32(size), c.get(), err)
		}
	})
}

// plus writes n with an explicit sign and underscores between its
// digits, as Python's int() also reads.
func plus(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := "+"
	if n < 0 {
		sign, s = "-", s[1:]
	}
	return sign + strings.Join(strings.Split(s, ""), "_")
}
