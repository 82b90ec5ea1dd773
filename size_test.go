package zklock

import "testing"

// kazoo reads a semaphore's recorded size with Python's int(), which
// takes the decimal digits of every script: a kazoo Semaphore of 3 leases
// accepts the data "٣" as its size, so a kazoo-layout zklock Semaphore of
// another size must refuse it, not ignore it as no number (both would
// then grant leases on one path under different sizes). The values are
// Python 3.11's.
func TestParseDecimalReadsDigitsOfAnyScript(t *testing.T) {
	for _, tc := range []struct {
		data string
		n    int64
	}{
		{"\u0663", 3}, {"\uff15", 5}, {"\u0663_\u0664", 34}, {"\u0661\u0662\u0663", 123},
		{"\U0001D7D7", 9}, {"\U0001D7D8\U0001D7E1", 9}, {" -\u0967\u0966 ", -10}, {"\u09e6\u0030", 0},
	} {
		if n, ok := parseSize([]byte(tc.data)); !ok || n != tc.n {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.data, n, ok, tc.n)
		}
	}
	for _, data := range []string{"\u00b2", "\u2163", "\u0663\u0664_", "\u200b5"} { // superscript, Roman numeral: not Nd
		if n, ok := parseSize([]byte(data)); ok {
			t.Errorf("parseSize(%q) = %d, want no number", data, n)
		}
	}
}
