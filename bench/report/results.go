package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rayctl/rayctl/bench/benchjson"
)

// suiteFiles is what the results directory holds for one suite: its table, and its JSON when the suite
// writes one (a JSON without the figures of this shape counts as absent).
type suiteFiles struct {
	name    string
	heading string // the .md's first heading
	result  *benchjson.Suite
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
			var r benchjson.Suite
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
