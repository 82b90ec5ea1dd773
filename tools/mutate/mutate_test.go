package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const sample = `package p

func f(a, b int, ok bool) bool {
	if a < b && ok {
		g()
		return true
	}
	for i := 0; i < 3; i++ {
		defer g()
	}
	log.Debug("x")
	return false
}
`

// TestEnumerate lists every mutant of a small function, each as its source
// would read.
func TestEnumerate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := enumerate(dir, "p.go", "example.com/p")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Kind+": "+m.Desc)
		if m.Func != "f" {
			t.Errorf("%s: function %q", m.ID, m.Func)
		}
		if out := string(m.apply()); out == sample || !strings.HasPrefix(out, "package p") {
			t.Errorf("%s: apply made no change, or broke the file", m.ID)
		}
	}
	sort.Strings(got)
	want := []string{
		"&& -> ||: a < b && ok -> a < b || ok",
		"boundary moved: a < b -> a <= b",
		"boundary moved: i < 3 -> i <= 3",
		"call deleted: delete defer g()",
		"call deleted: delete g()",
		"comparison flipped: a < b -> a >= b",
		"comparison flipped: i < 3 -> i >= 3",
		"constant moved: for i := 0; i < 3; i++ { -> for i := (-1); i < 3; i++ {",
		"constant moved: for i := 0; i < 3; i++ { -> for i := 1; i < 3; i++ {",
		"constant moved: i < 3 -> i < 2",
		"constant moved: i < 3 -> i < 4",
		"forced false: if a < b && ok -> if false",
		"forced false: if i < 3 -> if false",
		"forced true: if a < b && ok -> if true",
		"forced true: if i < 3 -> if true",
		"return flipped: return false -> return true",
		"return flipped: return true -> return false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadEquivalents reads the list under its heading only, with or
// without a function.
func TestReadEquivalents(t *testing.T) {
	doc := "# Testing\n- a.go (f), `x < y -> x <= y`: not here\n" +
		"### Equivalent mutants\n- a.go (f), `x < y -> x <= y`: same\n  value\n- b.go, `delete g()`: no effect\n\nprose\n" +
		"## Next\n- c.go, `delete h()`: not here either\n"
	path := filepath.Join(t.TempDir(), "testing.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	eq, err := readEquivalents(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m    Mutant
		why  string
		want bool
	}{
		{Mutant{File: "a.go", Func: "f", Desc: "x < y -> x <= y"}, "same value", true},
		{Mutant{File: "a.go", Func: "g", Desc: "x < y -> x <= y"}, "", false},
		{Mutant{File: "b.go", Func: "any", Desc: "delete g()"}, "no effect", true},
		{Mutant{File: "c.go", Func: "", Desc: "delete h()"}, "", false},
	} {
		why, ok := equivalent(eq, &tc.m)
		if ok != tc.want || why != tc.why {
			t.Errorf("%+v: %q, %v; want %q, %v", tc.m, why, ok, tc.why, tc.want)
		}
	}
}
