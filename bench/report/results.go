package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// suiteResult is a suite's <suite>.json as bench (bench/results.go) writes it; only the fields read here.
type suiteResult struct {
	Suite    string     `json:"suite"`
	Title    string     `json:"title"`
	Measured string     `json:"measured"`
	Machine  string     `json:"machine"`
	Figures  []figure   `json:"figures"`
	Plots    []plotSpec `json:"plots"`
}

// figure is one headline figure; Met is nil where there is no goal.
type figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Goal  string `json:"goal"`
	Met   *bool  `json:"met"`
}

// plotSpec is one PNG to draw: Kind "cdf" (each series' Values are samples) or "line" (Points are x, y).
type plotSpec struct {
	File   string   `json:"file"`
	Title  string   `json:"title"`
	Kind   string   `json:"kind"`
	XLabel string   `json:"xLabel"`
	YLabel string   `json:"yLabel"`
	Series []series `json:"series"`
	// Goal, when set, is a dashed horizontal line at that y, named GoalLabel.
	Goal      *float64 `json:"goal"`
	GoalLabel string   `json:"goalLabel"`
}

// series is one sample set or curve.
type series struct {
	Name   string       `json:"name"`
	Values []float64    `json:"values"`
	Points [][2]float64 `json:"points"`
}

// suiteFiles is what the results directory holds for one suite: its table, and its JSON when the suite
// writes one (a JSON without the figures of this shape counts as absent).
type suiteFiles struct {
	name    string
	heading string // the .md's first heading
	result  *suiteResult
}

// readResults lists the suites of dir, by name, from its .md files (README.md aside).
func readResults(dir string) ([]suiteFiles, error) {
	mds, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	var out []suiteFiles
	for _, md := range mds {
		name := strings.TrimSuffix(filepath.Base(md), ".md")
		if name == "README" {
			continue
		}
		s := suiteFiles{name: name, heading: name}
		if b, err := os.ReadFile(md); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			s.heading = strings.TrimSpace(strings.TrimLeft(first, "#"))
		}
		if b, err := os.ReadFile(filepath.Join(dir, name+".json")); err == nil {
			var r suiteResult
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, fmt.Errorf("%s.json: %w", name, err)
			}
			if r.Suite == name && len(r.Figures) > 0 {
				s.result = &r
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}
