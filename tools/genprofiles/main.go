// Command genprofiles writes the builtin compute profiles (profile.Builtin), one
// <name>.json per architecture, into a folder. The shipped profiles/ folder is its output;
// profile's tests fail when it is stale, and running
//
//	go run ./tools/genprofiles
//
// from the repository root brings it up to date.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ssfusion/ssfusion/profile"
)

func main() {
	out := flag.String("out", "profiles", "folder to write <name>.json into")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "genprofiles: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "genprofiles:", err)
		os.Exit(1)
	}
}

func generate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, name := range profile.Architectures() {
		p, err := profile.Builtin(name)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".json")
		if err := p.Save(path); err != nil {
			return err
		}
		fmt.Printf("%s: %d tensors, %d params, %.1f ms per iteration\n", path, len(p.Tensors), p.Params(), p.IterationMS())
	}
	return nil
}
