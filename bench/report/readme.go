package main

import (
	_ "embed"
	"fmt"
	"strings"
)

// intro is README.md's opening: what the suites measure and how to run them.
//
//go:embed intro.md
var intro string

// readme is bench/results/README.md: the intro, then every suite's headline figures beside their goals,
// then its plots.
func readme(suites []suiteFiles) string {
	var b strings.Builder
	b.WriteString("<!-- Written by bench/report from the *.json files beside it (`make bench`); edit bench/report/intro.md instead. -->\n\n")
	b.WriteString(intro)
	b.WriteString("\n## Figures and goals\n\n")
	b.WriteString("✔ meets the goal of issue 15, ✘ misses it; figures without a goal are shown for context. Each suite's table has the detail.\n\n")
	b.WriteString("| suite | figure | measured | goal | |\n|---|---|---|---|---|\n")
	for _, s := range suites {
		link := fmt.Sprintf("[%s](%s.md)", s.name, s.name)
		if s.result == nil {
			fmt.Fprintf(&b, "| %s | %s: no %s.json yet, the figures and goals are in its table | | | |\n", link, cell(s.heading), s.name)
			continue
		}
		for _, f := range s.result.Figures {
			goal, met := "", ""
			if f.Met != nil {
				goal, met = f.Goal, "✘"
				if *f.Met {
					met = "✔"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", link, cell(f.Name), cell(f.Value), cell(goal), met)
		}
	}
	b.WriteString("\nWhen and where each suite ran:\n\n")
	for _, s := range suites {
		if s.result != nil {
			fmt.Fprintf(&b, "- %s: %s, %s\n", s.name, s.result.Measured, s.result.Machine)
		}
	}
	for _, s := range suites {
		if s.result == nil || len(s.result.Plots) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n", s.result.Title)
		for _, p := range s.result.Plots {
			fmt.Fprintf(&b, "\n![%s](%s)\n", p.Title, p.File)
		}
	}
	return b.String()
}

// cell keeps text from breaking a table row.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
