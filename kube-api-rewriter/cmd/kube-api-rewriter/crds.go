package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/d8virt/kube-api-rewriter/pkg/crdrename"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// renameCRDs prints the renamed form of every CRD in the given files ("-" is standard input).
func renameCRDs(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: kube-api-rewriter rename-crds FILE [FILE ...], where FILE - is standard input")
	}
	rw := rewrite.New(rules.Default())
	first := true
	for _, name := range args {
		var src io.Reader = stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			src = f
		}
		var err error
		if first, err = crdrename.Stream(rw, src, stdout, first); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
