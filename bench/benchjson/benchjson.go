// Package benchjson is the shape of the <suite>.json files `make bench` writes beside each suite's table in
// bench/results: the suite's headline figures with their goals, and the plots to draw from its samples.
// The bench command writes them; bench/report (a module of its own, for its plotting library) reads them
// to draw the plots and to write bench/results/README.md.
package benchjson

// Suite is one suite's <suite>.json.
type Suite struct {
	// Suite is the suite's name (the file's base name); Title its heading.
	Suite string `json:"suite"`
	Title string `json:"title"`
	// Measured is when (UTC, RFC 3339); Machine what it ran on and how busy the machine was.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// Figures are the headline figures, each with its goal where issue 15 sets one.
	Figures []Figure `json:"figures"`
	// Plots are drawn by bench/report into the results directory, under their File names.
	Plots []Plot `json:"plots,omitempty"`
}

// Figure is one headline figure.
type Figure struct {
	// Name says what was measured; Value is the figure as text with its unit.
	Name  string `json:"name"`
	Value string `json:"value"`
	// Goal is the goal as text ("≤ 15 s"); Met says whether the figure meets it (nil: no goal).
	Goal string `json:"goal,omitempty"`
	Met  *bool  `json:"met,omitempty"`
}

// Plot is one PNG: the distributions of several sample sets (Kind "cdf": each series' Values are
// samples, drawn as the share of samples at or below each value), curves (Kind "line": each series'
// Points are x, y pairs) or grouped bars (Kind "bar": each series' Values are one bar per category, in
// the order of Categories).
type Plot struct {
	File   string   `json:"file"`
	Title  string   `json:"title"`
	Kind   string   `json:"kind"`
	XLabel string   `json:"xLabel"`
	YLabel string   `json:"yLabel"`
	Series []Series `json:"series"`
	// Categories name the groups of bars of a "bar" plot, left to right.
	Categories []string `json:"categories,omitempty"`
	// Goal, when set, is drawn as a dashed horizontal line at that y, named GoalLabel.
	Goal      *float64 `json:"goal,omitempty"`
	GoalLabel string   `json:"goalLabel,omitempty"`
	// XMarks, on a "cdf" plot, are drawn as dashed vertical lines at their X, named by their Label
	// (a goal on the samples' values, such as a latency's p99 goal).
	XMarks []Mark `json:"xMarks,omitempty"`
}

// Mark is one vertical line of a plot.
type Mark struct {
	X     float64 `json:"x"`
	Label string  `json:"label"`
}

// Series is one sample set or curve of a plot.
type Series struct {
	Name   string       `json:"name"`
	Values []float64    `json:"values,omitempty"`
	Points [][2]float64 `json:"points,omitempty"`
}
