package gen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// comment is one Go doc comment split into the text that becomes a schema description and the
// "+marker" lines that carry the kubebuilder/openapi-gen hints.
type comment struct {
	text    string
	markers []string
}

// typeDocs holds the comments of one named type and of its fields (by Go field name).
type typeDocs struct {
	doc    comment
	fields map[string]comment
}

// docIndex reads Go doc comments from the source of the packages the types come from. The
// descriptions upstream CRDs carry are made from exactly these comments, and the source is in the
// module cache because the types are compiled into this program.
type docIndex struct {
	dirs  map[string]string              // import path -> source directory
	pkgs  map[string]map[string]typeDocs // import path -> type name -> docs
	dirFn func() (map[string]string, error)
}

func newDocIndex() *docIndex {
	return &docIndex{pkgs: map[string]map[string]typeDocs{}, dirFn: listPackageDirs}
}

// rootPackages are the packages whose dependency closure covers every type the CRDs use.
var rootPackages = []string{"kubevirt.io/api/core/v1"}

// listPackageDirs asks the go command where the sources of the types' packages are, so that the
// generator follows whatever versions go.mod pins instead of guessing module cache paths.
func listPackageDirs() (map[string]string, error) {
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}"}, rootPackages...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %v: %w: %s", rootPackages, err, strings.TrimSpace(stderr.String()))
	}
	dirs := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, dir, ok := strings.Cut(line, "\t")
		if ok && dir != "" {
			dirs[path] = dir
		}
	}
	return dirs, nil
}

// lookup returns the docs of a named type, or a zero value when its package has no source (the
// schema then simply has no description).
func (ix *docIndex) lookup(pkgPath, name string) (typeDocs, error) {
	if pkgPath == "" {
		return typeDocs{}, nil
	}
	pkg, ok := ix.pkgs[pkgPath]
	if !ok {
		if ix.dirs == nil {
			dirs, err := ix.dirFn()
			if err != nil {
				return typeDocs{}, err
			}
			ix.dirs = dirs
		}
		var err error
		if pkg, err = parsePackage(ix.dirs[pkgPath]); err != nil {
			return typeDocs{}, fmt.Errorf("package %s: %w", pkgPath, err)
		}
		ix.pkgs[pkgPath] = pkg
	}
	return pkg[name], nil
}

// parsePackage collects the type and field comments of every non-test Go file in dir.
func parsePackage(dir string) (map[string]typeDocs, error) {
	out := map[string]typeDocs{}
	if dir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				// A lone "type X struct" keeps its comment on the declaration, not the spec.
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				td := typeDocs{doc: parseComment(doc), fields: map[string]comment{}}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, fld := range st.Fields.List {
						c := parseComment(fld.Doc)
						for _, n := range fieldNames(fld) {
							td.fields[n] = c
						}
					}
				}
				out[ts.Name.Name] = td
			}
		}
	}
	return out, nil
}

// fieldNames gives the Go names of a field list entry; an embedded field is named by its type.
func fieldNames(f *ast.Field) []string {
	if len(f.Names) > 0 {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = n.Name
		}
		return names
	}
	t := f.Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t := t.(type) {
	case *ast.Ident:
		return []string{t.Name}
	case *ast.SelectorExpr:
		return []string{t.Sel.Name}
	}
	return nil
}

// parseComment turns a comment group into description text and markers, the way controller-gen
// does for the upstream CRDs: marker lines ("+...") are not part of the description, line breaks
// are kept, and surrounding blank lines are dropped.
func parseComment(cg *ast.CommentGroup) comment {
	if cg == nil {
		return comment{}
	}
	var c comment
	var lines []string
	for line := range strings.SplitSeq(cg.Text(), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "+") {
			c.markers = append(c.markers, strings.TrimPrefix(trimmed, "+"))
			continue
		}
		lines = append(lines, strings.TrimRight(line, " \t"))
	}
	c.text = strings.TrimSpace(collapseBlank(lines))
	return c
}

// collapseBlank joins lines, keeping at most one empty line in a row: removing marker lines can
// leave two paragraphs separated by several blank lines.
func collapseBlank(lines []string) string {
	var b strings.Builder
	blank := false
	for _, l := range lines {
		if l == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
