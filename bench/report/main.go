// Command report draws the plots of `make bench`'s results and writes their index: for every
// <suite>.json in the results directory (see bench/results.go for its shape) it draws the PNGs the JSON
// asks for beside it, and it writes README.md, which links every suite's table with its headline
// figures and their goals (✔ met, ✘ missed).
//
//	go run . -results ../results
//
// It is a module of its own so that the plotting library stays out of rayctl's module.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("results", "bench/results", "the results directory (read and written)")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	suites, err := readResults(dir)
	if err != nil {
		return err
	}
	for _, s := range suites {
		if s.result == nil {
			continue
		}
		for _, p := range s.result.Plots {
			path := filepath.Join(dir, p.File)
			if err := draw(p, path); err != nil {
				return fmt.Errorf("%s: %s: %w", s.name, p.File, err)
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", path)
		}
	}
	path := filepath.Join(dir, "README.md")
	if err := os.WriteFile(path, []byte(readme(suites)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}
