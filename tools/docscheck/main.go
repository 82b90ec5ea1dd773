// Command docscheck checks the repository's Markdown: every relative link
// (and its #anchor, in a Markdown target) resolves, and every Go block that
// a page marks as the copy of a source declaration is that declaration, as
// it is in the source.
//
//	go run ./tools/docscheck            # from the repository's root
//	go run ./tools/docscheck -root DIR  # elsewhere
//
// A page marks a copy with an HTML comment right before the fence:
//
//	<!-- source: example_patterns_test.go Example_workerPool -->
//	```go
//	...the body of Example_workerPool, one tab less...
//	```
//
// An Example function's copy is its body; any other name (a type, a
// function, a method as Type.Method) is its whole declaration with its doc
// comment, and several names are joined by a blank line.
//
// It also holds the docs, the Go files (not tests) and the go.mod files to
// one install story: every `go get` or `go install` of a module of this
// repository names it @main, as the README's Install section does (or
// @vX.Y.Z, the release steps' template), and nothing names the placeholder
// version (v0.0.0-0001010100..., which exists nowhere) that the modules
// once required the library at.
//
// It prints each problem as file:line: message and exits 1 if there was
// any.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	problems, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// check walks root's Markdown files, leaving out directories that hold no
// documentation of the project (hidden ones, testdata, node_modules).
func check(root string) ([]string, error) {
	var problems []string
	if err := loadMakeTargets(root); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		ps, err := checkFile(root, path)
		problems = append(problems, ps...)
		return err
	})
	return problems, err
}

// checkFile checks a Markdown page whole, and the install story in a Go
// file (not a test) or a go.mod; other files not at all.
func checkFile(root, path string) ([]string, error) {
	switch {
	case strings.HasSuffix(path, ".md"):
		return checkPage(root, path)
	case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"), filepath.Base(path) == "go.mod":
		return checkInstallsIn(path)
	}
	return nil, nil
}

var (
	linkRE   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refRE    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+(\S+)`)
	codeRE   = regexp.MustCompile("`[^`]*`")
	sourceRE = regexp.MustCompile(`^<!--\s*source:\s*(\S+)\s+(.+?)\s*-->\s*$`)
)

// page is a Markdown file, line by line.
type page struct {
	path  string
	lines []string
}

func checkPage(root, path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := page{path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		p.lines = append(p.lines, sc.Text())
	}
	var problems []string
	inFence := false
	for i, l := range p.lines {
		for _, msg := range []string{checkInstall(l), checkMake(l, inFence)} {
			if msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", p.path, i+1, msg))
			}
		}
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			problems = append(problems, p.checkLine(root, i)...)
		}
	}
	return problems, nil
}

// checkLine checks line i, outside the page's code fences: its links, and
// the copy it marks.
func (p page) checkLine(root string, i int) []string {
	var msgs []string
	if m := sourceRE.FindStringSubmatch(p.lines[i]); m != nil {
		msgs = append(msgs, p.checkCopy(root, i, m[1], strings.Fields(m[2])))
	}
	for _, target := range targets(p.lines[i]) {
		msgs = append(msgs, checkLink(root, p.path, target))
	}
	var problems []string
	for _, msg := range msgs {
		if msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: %s", p.path, i+1, msg))
		}
	}
	return problems
}

// targets returns the link targets on a line, outside inline code.
func targets(l string) []string {
	l = codeRE.ReplaceAllString(l, "")
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
		out = append(out, m[1])
	}
	if m := refRE.FindStringSubmatch(l); m != nil {
		out = append(out, m[1])
	}
	return out
}

// checkLink resolves a relative target from the page at path; an anchor is
// checked against the headings of a Markdown target.
func checkLink(root, path, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	resolved := path
	if file != "" {
		if strings.HasPrefix(file, "/") {
			resolved = filepath.Join(root, file)
		} else {
			resolved = filepath.Join(filepath.Dir(path), file)
		}
		if _, err := os.Stat(resolved); err != nil {
			return fmt.Sprintf("link %s: %s does not exist", target, resolved)
		}
	}
	if anchor == "" || !strings.HasSuffix(resolved, ".md") {
		return ""
	}
	anchors, err := anchorsOf(resolved)
	if err != nil {
		return fmt.Sprintf("link %s: %v", target, err)
	}
	if !anchors[anchor] {
		return fmt.Sprintf("link %s: %s has no heading with anchor #%s", target, resolved, anchor)
	}
	return ""
}

// anchorsOf returns the anchors GitHub makes for a page's headings: the
// heading's text in lower case, inline code marks and punctuation other
// than '-' and '_' removed, spaces made '-'; a repeated anchor gets -1, -2...
func anchorsOf(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		a := slug(text)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkCopy compares the Go fence that follows line i with the named
// declarations of file (relative to root).
func (p page) checkCopy(root string, i int, file string, names []string) string {
	if i+1 >= len(p.lines) || strings.TrimSpace(p.lines[i+1]) != "```go" {
		return "a source comment must be followed by a ```go fence"
	}
	var block []string
	end := -1
	for j := i + 2; j < len(p.lines); j++ {
		if strings.TrimSpace(p.lines[j]) == "```" {
			end = j
			break
		}
		block = append(block, p.lines[j])
	}
	if end < 0 {
		return "unterminated ```go fence"
	}
	want, err := declarations(filepath.Join(root, file), names)
	if err != nil {
		return err.Error()
	}
	got := strings.TrimSpace(strings.Join(block, "\n"))
	if got != want {
		return fmt.Sprintf("the block after this line is not %s's %s as it is now:\n%s",
			file, strings.Join(names, " "), diffLine(got, want))
	}
	return ""
}

// declarations returns the source of names in file, joined by blank lines.
func declarations(file string, names []string) (string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, name := range names {
		text, ok := declaration(fset, f, src, name)
		if !ok {
			return "", fmt.Errorf("%s declares no %s", file, name)
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, "\n\n"), nil
}

func declaration(fset *token.FileSet, f *ast.File, src []byte, name string) (string, bool) {
	offset := func(pos token.Pos) int { return fset.Position(pos).Offset }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if funcName(d) != name {
				continue
			}
			if d.Recv == nil && strings.HasPrefix(name, "Example") {
				body := string(src[offset(d.Body.Lbrace)+1 : offset(d.Body.Rbrace)])
				return strings.TrimSpace(dedent(body)), true
			}
			return withDoc(src, offset, d.Doc, d.Pos(), d.End()), true
		case *ast.GenDecl:
			if declares(d, name) {
				return withDoc(src, offset, d.Doc, d.Pos(), d.End()), true
			}
		}
	}
	return "", false
}

// funcName is a function's name, or a method's as Type.Method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil {
		return d.Name.Name
	}
	return receiver(d) + "." + d.Name.Name
}

// declares reports whether a type, var or const declaration names name.
func declares(d *ast.GenDecl, name string) bool {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.Name == name {
				return true
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.Name == name {
					return true
				}
			}
		}
	}
	return false
}

func receiver(d *ast.FuncDecl) string {
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func withDoc(src []byte, offset func(token.Pos) int, doc *ast.CommentGroup, pos, end token.Pos) string {
	start := offset(pos)
	if doc != nil {
		start = offset(doc.Pos())
	}
	return strings.TrimSpace(string(src[start:offset(end)]))
}

// dedent removes one leading tab from every line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n")
}

// diffLine names the first line where got and want differ.
func diffLine(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("  line %d of the block: %q\n  in the source:        %q", i+1, gl, wl)
		}
	}
	return ""
}

// The install story: the module's own paths in a go get or go install, and
// the placeholder version no module of the repository requires any more.
var (
	installRE     = regexp.MustCompile(`\bgo\s+(get|install)\b`)
	modulePathRE  = regexp.MustCompile(`github\.com/zkrecipes/zklock(/[A-Za-z0-9_./-]*[A-Za-z0-9_])?(@[^\s` + "`" + `'"),]*)?`)
	placeholderRE = regexp.MustCompile(`v0\.0\.0-00010101000000-000000000000`)
)

// installVersion is the one version the docs tell users to get, and
// releaseTemplate the one the release steps name. Once a version is
// tagged, the README's Install section and installVersion name it.
const (
	installVersion  = "@main"
	releaseTemplate = "@vX.Y.Z"
)

// checkInstall returns what is wrong with line l's install story, or "".
func checkInstall(l string) string {
	if placeholderRE.MatchString(l) {
		return "the placeholder version, which exists nowhere: the modules require the library at a commit (docs/contributing.md, \"Pinning the library\"), and users get them " + installVersion
	}
	if !installRE.MatchString(l) {
		return ""
	}
	for _, m := range modulePathRE.FindAllStringSubmatch(l[installRE.FindStringIndex(l)[0]:], -1) {
		if m[2] != installVersion && m[2] != releaseTemplate {
			return fmt.Sprintf("%s: get this repository's modules %s, as the README's Install section does", m[0], installVersion)
		}
	}
	return ""
}

// checkInstallsIn checks the install story in the lines of a Go file or a
// go.mod.
func checkInstallsIn(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	for i, l := range strings.Split(string(data), "\n") {
		if msg := checkInstall(l); msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: %s", path, i+1, msg))
		}
	}
	return problems, nil
}

// makeTargets are the targets the repository's Makefile defines, which a
// page that says `make <target>` must name (a newcomer copies the command).
var makeTargets map[string]bool

var (
	makeRuleRE = regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:([^=]|$)`)
	makeCmdRE  = regexp.MustCompile(`^make\s+([a-z][a-z0-9-]*)`)
)

// loadMakeTargets reads the targets of root's Makefile; none if it has none.
func loadMakeTargets(root string) error {
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if errors.Is(err, fs.ErrNotExist) {
		makeTargets = nil
		return nil
	}
	if err != nil {
		return err
	}
	makeTargets = map[string]bool{}
	for _, m := range makeRuleRE.FindAllStringSubmatch(string(data), -1) {
		makeTargets[m[1]] = true
	}
	return nil
}

// checkMake returns what is wrong with the make commands on line l, or "":
// a command in a code fence (a line that starts with make) or in inline
// code (`make demo`) must name a target the Makefile defines.
func checkMake(l string, inFence bool) string {
	if makeTargets == nil {
		return ""
	}
	cmds := codeRE.FindAllString(l, -1)
	for i, c := range cmds {
		cmds[i] = strings.Trim(c, "`")
	}
	if inFence {
		cmds = []string{strings.TrimSpace(l)}
	}
	for _, c := range cmds {
		if m := makeCmdRE.FindStringSubmatch(c); m != nil && !makeTargets[m[1]] {
			return fmt.Sprintf("make %s: the Makefile has no target %q", m[1], m[1])
		}
	}
	return ""
}
