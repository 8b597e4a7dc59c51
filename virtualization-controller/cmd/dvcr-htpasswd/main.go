// Command dvcr-htpasswd writes the htpasswd files of DVCR's registries from their users'
// .dockerconfigjson (pkg/htpasswd): DVCR's pod runs it before its registries start.
//
//	dvcr-htpasswd CONFIG OUT [CONFIG OUT ...]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/d8virt/virtualization-controller/pkg/htpasswd"
)

// file is one htpasswd file to write (out) from a .dockerconfigjson (config).
type file struct {
	config, out string
}

func parse(args []string) ([]file, error) {
	fs := flag.NewFlagSet("dvcr-htpasswd", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: dvcr-htpasswd CONFIG OUT [CONFIG OUT ...]") }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if len(rest) == 0 || len(rest)%2 != 0 {
		return nil, errors.New("give pairs of a .dockerconfigjson and the htpasswd file to write from it")
	}
	var files []file
	for i := 0; i < len(rest); i += 2 {
		files = append(files, file{config: rest[i], out: rest[i+1]})
	}
	return files, nil
}

func run(files []file) error {
	for _, f := range files {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return err
		}
		lines, err := htpasswd.FromDockerConfig(b)
		if err != nil {
			return fmt.Errorf("%s: %w", f.config, err)
		}
		// Only hashes: the registry, another container of the pod, reads it.
		if err := os.WriteFile(f.out, lines, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	files, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil {
		err = run(files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dvcr-htpasswd:", err)
		os.Exit(1)
	}
}
