package main

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"

	"github.com/rayctl/rayctl/bench/benchjson"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
)

// draw renders p as a PNG at path.
func draw(p benchjson.Plot, path string) error {
	plt := plot.New()
	plt.Title.Text = p.Title
	plt.X.Label.Text = p.XLabel
	plt.Y.Label.Text = p.YLabel
	plt.Add(plotter.NewGrid())
	plt.Legend.Top = true
	plt.Legend.Left = p.Kind == "line"
	plt.Y.Min = 0
	if p.Kind == "bar" {
		if err := bars(plt, p); err != nil {
			return err
		}
		plt.BackgroundColor = color.White
		// Many categories get a wider canvas, so that their names stay apart.
		return plt.Save(max(16, 2*vg.Length(len(p.Categories)))*vg.Centimeter, 10*vg.Centimeter, path)
	}
	for i, s := range p.Series {
		var xys plotter.XYs
		switch p.Kind {
		case "cdf":
			xys = cdf(s.Values)
		case "line":
			for _, pt := range s.Points {
				xys = append(xys, plotter.XY{X: pt[0], Y: pt[1]})
			}
		default:
			return fmt.Errorf("unknown plot kind %q", p.Kind)
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = seriesColor(i)
		line.Width = vg.Points(1.5)
		plt.Add(line)
		entry := []plot.Thumbnailer{line}
		if p.Kind == "cdf" {
			line.StepStyle = plotter.PostStep
		} else {
			points, err := plotter.NewScatter(xys)
			if err != nil {
				return err
			}
			points.Color = line.Color
			points.Shape = plotutil.Shape(i)
			plt.Add(points)
			entry = append(entry, points)
		}
		plt.Legend.Add(s.Name, entry...)
	}
	if p.Goal != nil {
		goal := *p.Goal
		line := plotter.NewFunction(func(float64) float64 { return goal })
		line.Color = color.Gray{Y: 80}
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		line.Width = vg.Points(1.5)
		plt.Add(line)
		plt.Legend.Add(p.GoalLabel, line)
		plt.Y.Max = max(plt.Y.Max, goal*1.1)
	}
	for i, m := range p.XMarks {
		line, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: 0}, {X: m.X, Y: 1}})
		if err != nil {
			return err
		}
		line.Color = color.Gray{Y: uint8(60 + 50*(i%3))}
		line.Dashes = []vg.Length{vg.Points(2 + 3*float64(i%3)), vg.Points(3)}
		line.Width = vg.Points(1.2)
		plt.Add(line)
		plt.Legend.Add(m.Label, line)
	}
	if p.Kind == "cdf" {
		// Room on the right for the legend, which would otherwise sit on the slowest curve.
		plt.X.Min, plt.X.Max = 0, plt.X.Max*1.4
		plt.Y.Max = 1
		plt.Y.Label.Text = "share of samples at or below"
		plt.Legend.Top, plt.Legend.Left = false, false
	}
	plt.BackgroundColor = color.White
	return plt.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// bars adds p's series to plt as groups of bars, one group per category, a series' bars side by side
// in the order of the series.
func bars(plt *plot.Plot, p benchjson.Plot) error {
	n := len(p.Series)
	// Bars 22 points wide, narrower when a group's would crowd its neighbours (a category is 2 cm or more).
	width := min(vg.Length(22), vg.Centimeter*1.6/vg.Length(max(n, 1)))
	top := 0.0
	for i, s := range p.Series {
		if len(s.Values) != len(p.Categories) {
			return fmt.Errorf("bar series %q has %d values for %d categories", s.Name, len(s.Values), len(p.Categories))
		}
		b, err := plotter.NewBarChart(plotter.Values(s.Values), width)
		if err != nil {
			return err
		}
		b.Color = seriesColor(i)
		b.LineStyle.Width = 0
		b.Offset = width * vg.Length(2*i-n+1) / 2
		plt.Add(b)
		plt.Legend.Add(s.Name, b)
		// Each bar's value above it.
		labels := plotter.XYLabels{XYs: make(plotter.XYs, len(s.Values)), Labels: make([]string, len(s.Values))}
		for j, v := range s.Values {
			labels.XYs[j] = plotter.XY{X: float64(j), Y: v}
			labels.Labels[j] = fmt.Sprintf("%.3g", v)
			top = max(top, v)
		}
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		for k := range l.TextStyle {
			l.TextStyle[k].XAlign = vgdraw.XCenter
			// Narrow bars get smaller figures, so that neighbours' do not run together.
			l.TextStyle[k].Font.Size = l.TextStyle[k].Font.Size * min(1, width/22)
		}
		l.Offset = vg.Point{X: b.Offset, Y: vg.Points(2)}
		plt.Add(l)
	}
	plt.NominalX(p.Categories...)
	// Room above the bars for the legend, and beside the outer groups.
	plt.Y.Max = top * 1.5
	plt.X.Min, plt.X.Max = -0.6, float64(len(p.Categories))-0.4
	plt.Legend.Left = false
	return nil
}

// cdf is the empirical distribution of values: for each sample, the share of samples at or below it.
func cdf(values []float64) plotter.XYs {
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	xys := make(plotter.XYs, 0, len(v)+1)
	if len(v) > 0 {
		xys = append(xys, plotter.XY{X: v[0], Y: 0})
	}
	for i, x := range v {
		xys = append(xys, plotter.XY{X: x, Y: float64(i+1) / float64(len(v))})
	}
	return xys
}

// palette is ten colours of distinct hues (Tableau's ten), so that a plot's series up to ten each get
// their own, neighbours clearly apart (plotutil.Color repeats after seven, and its dark set's red is
// close to its soft set's).
var palette = []color.Color{
	color.RGBA{0x4e, 0x79, 0xa7, 0xff}, color.RGBA{0xf2, 0x8e, 0x2b, 0xff}, color.RGBA{0xe1, 0x57, 0x59, 0xff},
	color.RGBA{0x76, 0xb7, 0xb2, 0xff}, color.RGBA{0x59, 0xa1, 0x4f, 0xff}, color.RGBA{0xed, 0xc9, 0x48, 0xff},
	color.RGBA{0xb0, 0x7a, 0xa1, 0xff}, color.RGBA{0xff, 0x9d, 0xa7, 0xff}, color.RGBA{0x9c, 0x75, 0x5f, 0xff},
	color.RGBA{0xba, 0xb0, 0xac, 0xff},
}

// seriesColor is the colour of a plot's i-th series.
func seriesColor(i int) color.Color { return palette[i%len(palette)] }
