package app

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/d8virt/kube-api-rewriter/pkg/crdrename"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// errRenameCRDsUsage is what rename-crds says when it is given no file.
var errRenameCRDsUsage = errors.New("usage: kube-api-rewriter rename-crds FILE [FILE ...], where FILE - is standard input")

// RenameCRDs prints the renamed form of every CRD in the given files ("-" is standard input), as
// the embedded rules rename them.
func RenameCRDs(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errRenameCRDsUsage
	}
	rw := rewrite.New(rules.Default())
	first := true
	for _, name := range args {
		var err error
		if first, err = renameCRDFile(rw, name, stdin, stdout, first); err != nil {
			return err
		}
	}
	return nil
}

// renameCRDFile renames the CRDs of one file; first says whether nothing was printed before.
func renameCRDFile(rw *rewrite.Rewriter, name string, stdin io.Reader, stdout io.Writer, first bool) (bool, error) {
	src := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return first, err
		}
		defer f.Close()
		src = f
	}
	first, err := crdrename.Stream(rw, src, stdout, first)
	if err != nil {
		return first, fmt.Errorf("%s: %w", name, err)
	}
	return first, nil
}
