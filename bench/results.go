package main

// What every suite leaves in bench/results/: <suite>.md for people and <suite>.json beside it, from which
// bench/report draws the plots the .md links and writes bench/results/README.md. The JSON is the only
// contract between the two: report knows nothing of the suites, only of this shape (bench/report/results.go
// reads the same fields).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// suiteResult is one suite's <suite>.json.
type suiteResult struct {
	// Suite is the suite's name (the file's base name); Title its heading.
	Suite string `json:"suite"`
	Title string `json:"title"`
	// Measured is when (UTC, RFC 3339); Machine what it ran on and how busy the machine was.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// Figures are the headline figures, each with its goal where the issue sets one.
	Figures []figure `json:"figures"`
	// Plots are drawn by bench/report into the results directory, under their File names.
	Plots []plotSpec `json:"plots,omitempty"`
}

// figure is one headline figure.
type figure struct {
	// Name says what was measured; Value is the figure as text with its unit.
	Name  string `json:"name"`
	Value string `json:"value"`
	// Goal is the goal as text ("≤ 15 s"); Met says whether the figure meets it (absent: no goal).
	Goal string `json:"goal,omitempty"`
	Met  *bool  `json:"met,omitempty"`
}

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

// plotSpec is one PNG: either the distributions of several sample sets (Kind "cdf": each series'
// Values are samples, drawn as the share of samples at or below each value) or curves (Kind "line":
// each series' Points are x, y pairs).
type plotSpec struct {
	File   string   `json:"file"`
	Title  string   `json:"title"`
	Kind   string   `json:"kind"`
	XLabel string   `json:"xLabel"`
	YLabel string   `json:"yLabel"`
	Series []series `json:"series"`
	// Goal, when set, is drawn as a dashed horizontal line at that y, named GoalLabel.
	Goal      *float64 `json:"goal,omitempty"`
	GoalLabel string   `json:"goalLabel,omitempty"`
}

// series is one sample set or curve of a plot.
type series struct {
	Name   string       `json:"name"`
	Values []float64    `json:"values,omitempty"`
	Points [][2]float64 `json:"points,omitempty"`
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
