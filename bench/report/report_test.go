package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/bench/benchjson"
)

// A results directory with one suite that has JSON and one that has only its table: the plots the JSON
// asks for are drawn as PNGs, and the README links both suites with the figures beside their goals.
func TestReportDrawsPlotsAndIndexesSuites(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"scale.md": "# Many RayClusters\n",
		"scale.json": `{"suite": "scale", "title": "Many RayClusters", "measured": "2026-12-02T09:00:00Z", "machine": "2 cores",
			"figures": [{"name": "1000 pods → all ready", "value": "240 s", "goal": "≤ 15 s", "met": false},
			            {"name": "100 pods → all ready", "value": "9.4 s"},
			            {"name": "API p99", "value": "80 ms", "goal": "≤ 100 ms", "met": true}],
			"plots": [{"file": "scale-wall.png", "title": "wall", "kind": "line", "xLabel": "pods", "yLabel": "s", "goal": 15, "goalLabel": "goal",
			           "series": [{"name": "wall", "points": [[100, 9.4], [1000, 240]]}]},
			          {"file": "scale-cdf.png", "title": "cdf", "kind": "cdf", "xLabel": "ms", "series": [{"name": "fake", "values": [3, 1, 2]}],
			           "xMarks": [{"x": 2, "label": "goal: p50 ≤ 2 ms"}]}]}`,
		"chain.md": "# Trigger chain\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for _, png := range []string{"scale-wall.png", "scale-cdf.png"} {
		b, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", png, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, want := range []string{
		"| [scale](scale.md) | 1000 pods → all ready | 240 s | ≤ 15 s | ✘ |",
		"| [scale](scale.md) | 100 pods → all ready | 9.4 s |  |  |",
		"| [scale](scale.md) | API p99 | 80 ms | ≤ 100 ms | ✔ |",
		"[chain](chain.md) | Trigger chain: no chain.json yet",
		"![wall](scale-wall.png)",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks %q:\n%s", want, readme)
		}
	}
}

// An unknown plot kind is an error naming the file, not a blank picture.
func TestUnknownPlotKind(t *testing.T) {
	err := draw(benchjson.Plot{File: "x.png", Kind: "pie", Series: []benchjson.Series{{Name: "a", Values: []float64{1}}}}, filepath.Join(t.TempDir(), "x.png"))
	if err == nil || !strings.Contains(err.Error(), "pie") {
		t.Errorf("draw of kind pie: %v", err)
	}
}

// A bar plot draws one group per category; a series with a value missing for a category is an error.
func TestBarPlot(t *testing.T) {
	dir := t.TempDir()
	p := benchjson.Plot{File: "bars.png", Title: "start", Kind: "bar", YLabel: "s", Categories: []string{"cold", "warm"},
		Series: []benchjson.Series{{Name: "peer", Values: []float64{4.7, 3.4}}, {Name: "rayctl", Values: []float64{2.3, 0.7}}}}
	path := filepath.Join(dir, p.File)
	if err := draw(p, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("%s: not a PNG (%v)", path, err)
	}
	p.Series[1].Values = []float64{2.3}
	if err := draw(p, path); err == nil || !strings.Contains(err.Error(), "rayctl") {
		t.Errorf("a series short of a value: %v", err)
	}
}
