package main

// What every suite leaves in bench/results/: <suite>.md for people and <suite>.json beside it (package
// benchjson), from which bench/report draws the plots the .md links and writes bench/results/README.md.
// The JSON is the only contract between the two: report knows nothing of the suites.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rayctl/rayctl/bench/benchjson"
)

// The suites' short names for benchjson's types.
type (
	suiteResult = benchjson.Suite
	figure      = benchjson.Figure
	plotSpec    = benchjson.Plot
	series      = benchjson.Series
	xMark       = benchjson.Mark
)

// goalFigure is a figure with a goal that it meets or not.
func goalFigure(name, value, goal string, met bool) figure {
	return figure{Name: name, Value: value, Goal: goal, Met: &met}
}

// mark is ✔ or ✘, for the tables of the .md files.
func mark(met bool) string {
	if met {
		return "✔"
	}
	return "✘"
}

// msValues are durations in milliseconds, for a cdf series.
func msValues(v []time.Duration) []float64 {
	out := make([]float64, len(v))
	for i, d := range v {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// plotLinks is the markdown that shows r's plots (they are drawn beside the .md by bench/report).
func plotLinks(r suiteResult) string {
	s := ""
	for _, p := range r.Plots {
		s += fmt.Sprintf("\n![%s](%s)\n", p.Title, p.File)
	}
	return s
}

// writeSuite writes md (with r's plots linked at the end) to <out>/<suite>.md and r to <out>/<suite>.json,
// and prints md.
func writeSuite(out string, r suiteResult, md string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	r.Measured = time.Now().UTC().Format(time.RFC3339)
	if links := plotLinks(r); links != "" {
		md += "\nPlots (drawn by `bench/report` from " + r.Suite + ".json):\n" + links
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{r.Suite + ".md", []byte(md)}, {r.Suite + ".json", append(js, '\n')}} {
		path := filepath.Join(out, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	}
	fmt.Print(md)
	return nil
}
