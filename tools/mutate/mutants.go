package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A Mutant is one change to one file: the bytes [start, end) replaced by
// repl.
type Mutant struct {
	ID     string `json:"id"`   // file:line:col/kind, unique in a run
	File   string `json:"file"` // slash-separated, relative to the repository
	Line   int    `json:"line"`
	Col    int    `json:"col"`
	Func   string `json:"func,omitempty"`
	Kind   string `json:"kind"`
	Desc   string `json:"desc"` // what changed, as source text: "a < b -> a <= b"
	Pkg    string `json:"pkg"`  // the import path of the file's package
	start  int
	end    int
	repl   string
	source []byte
}

// apply returns the file's source with the mutation made.
func (m *Mutant) apply() []byte {
	out := make([]byte, 0, len(m.source)+len(m.repl))
	out = append(out, m.source[:m.start]...)
	out = append(out, m.repl...)
	return append(out, m.source[m.end:]...)
}

// negated and boundary give, for each comparison, the operator that flips
// it and the one that moves its boundary.
var (
	negated = map[token.Token]token.Token{
		token.EQL: token.NEQ, token.NEQ: token.EQL,
		token.LSS: token.GEQ, token.GEQ: token.LSS,
		token.GTR: token.LEQ, token.LEQ: token.GTR,
	}
	boundary = map[token.Token]token.Token{
		token.LSS: token.LEQ, token.LEQ: token.LSS,
		token.GTR: token.GEQ, token.GEQ: token.GTR,
	}
)

// logMethods are slog's: deleting a log call changes no decision, so such
// calls are not mutated.
var logMethods = map[string]bool{
	"Debug": true, "Info": true, "Warn": true, "Error": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true, "Log": true,
}

// enumerate returns every mutant of the file rel (relative to root), in
// source order.
func enumerate(root, rel, pkg string) ([]*Mutant, error) {
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	e := &enumerator{fset: fset, src: src, rel: rel, pkg: pkg}
	for _, d := range f.Decls {
		e.fn = ""
		if fd, ok := d.(*ast.FuncDecl); ok {
			e.fn = funcName(fd)
		}
		ast.Inspect(d, e.visit)
	}
	return e.out, nil
}

type enumerator struct {
	fset  *token.FileSet
	src   []byte
	rel   string
	pkg   string
	fn    string
	stack []ast.Node
	out   []*Mutant
}

func (e *enumerator) visit(n ast.Node) bool {
	if n == nil {
		e.stack = e.stack[:len(e.stack)-1]
		return true
	}
	e.mutate(n)
	e.stack = append(e.stack, n)
	return true
}

func (e *enumerator) mutate(n ast.Node) {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		e.binary(n)
	case *ast.IfStmt:
		e.forced(n.Cond)
	case *ast.ForStmt:
		if n.Cond != nil {
			e.forced(n.Cond)
		}
	case *ast.ExprStmt:
		if call, ok := n.X.(*ast.CallExpr); ok && !isLog(call) {
			e.add(n.Pos(), n.End(), "", "call deleted", "delete "+e.text(n.Pos(), n.End()))
		}
	case *ast.DeferStmt:
		e.add(n.Pos(), n.End(), "", "call deleted", "delete "+e.text(n.Pos(), n.End()))
	case *ast.ReturnStmt:
		for _, r := range n.Results {
			if id, ok := r.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
				flip := map[string]string{"true": "false", "false": "true"}[id.Name]
				e.add(id.Pos(), id.End(), flip, "return flipped",
					e.text(n.Pos(), n.End())+" -> "+e.around(n.Pos(), n.End(), id.Pos(), id.End(), flip))
			}
		}
	case *ast.BasicLit:
		e.integer(n)
	}
}

func (e *enumerator) binary(n *ast.BinaryExpr) {
	opEnd := n.OpPos + token.Pos(len(n.Op.String()))
	swap := func(to token.Token, kind string) {
		e.add(n.OpPos, opEnd, to.String(), kind,
			e.text(n.Pos(), n.End())+" -> "+e.around(n.Pos(), n.End(), n.OpPos, opEnd, to.String()))
	}
	if to, ok := negated[n.Op]; ok {
		swap(to, "comparison flipped")
	}
	if to, ok := boundary[n.Op]; ok {
		swap(to, "boundary moved")
	}
	switch n.Op {
	case token.LAND:
		swap(token.LOR, "&& -> ||")
	case token.LOR:
		swap(token.LAND, "|| -> &&")
	}
}

// forced makes a condition always true or always false while keeping what
// it uses used, so the mutant still compiles.
func (e *enumerator) forced(cond ast.Expr) {
	c := e.text(cond.Pos(), cond.End())
	e.add(cond.Pos(), cond.End(), "true || ("+e.raw(cond.Pos(), cond.End())+")", "forced true", "if "+c+" -> if true")
	e.add(cond.Pos(), cond.End(), "false && ("+e.raw(cond.Pos(), cond.End())+")", "forced false", "if "+c+" -> if false")
}

func (e *enumerator) integer(n *ast.BasicLit) {
	if n.Kind != token.INT {
		return
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil {
		return
	}
	// The context a reader needs to find the literal: its enclosing
	// expression, or its line.
	from, to := n.Pos(), n.End()
	if len(e.stack) > 0 {
		if p, ok := e.stack[len(e.stack)-1].(ast.Expr); ok {
			from, to = p.Pos(), p.End()
		}
	}
	if from == n.Pos() {
		from, to = e.line(n.Pos())
	}
	for _, d := range []int64{1, -1} {
		r := strconv.FormatInt(v+d, 10)
		if v+d < 0 {
			r = "(" + r + ")"
		}
		e.add(n.Pos(), n.End(), r, "constant moved",
			e.text(from, to)+" -> "+e.around(from, to, n.Pos(), n.End(), r))
	}
}

func (e *enumerator) add(from, to token.Pos, repl, kind, desc string) {
	p := e.fset.Position(from)
	e.out = append(e.out, &Mutant{
		ID:   fmt.Sprintf("%s:%d:%d/%s", e.rel, p.Line, p.Column, kind),
		File: e.rel, Line: p.Line, Col: p.Column, Func: e.fn, Kind: kind, Desc: desc, Pkg: e.pkg,
		start: e.off(from), end: e.off(to), repl: repl, source: e.src,
	})
}

func (e *enumerator) off(p token.Pos) int { return e.fset.Position(p).Offset }

func (e *enumerator) raw(from, to token.Pos) string { return string(e.src[e.off(from):e.off(to)]) }

// text is the source from..to on one line, spaces collapsed, shortened.
func (e *enumerator) text(from, to token.Pos) string { return squash(e.raw(from, to)) }

// around is text(from, to) with [a, b) replaced by repl.
func (e *enumerator) around(from, to, a, b token.Pos, repl string) string {
	return squash(e.raw(from, a) + repl + e.raw(b, to))
}

// line returns the trimmed line that holds p.
func (e *enumerator) line(p token.Pos) (token.Pos, token.Pos) {
	o := e.off(p)
	s, t := o, o
	for s > 0 && e.src[s-1] != '\n' {
		s--
	}
	for t < len(e.src) && e.src[t] != '\n' {
		t++
	}
	base := p - token.Pos(o)
	return base + token.Pos(s), base + token.Pos(t)
}

func squash(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

func isLog(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !logMethods[sel.Sel.Name] {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(x.Name), "log")
	case *ast.SelectorExpr:
		return strings.Contains(strings.ToLower(x.Sel.Name), "log")
	}
	return false
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
