package raysim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// flagSet is a forgiving parser for the command lines of raysim's commands
// other than `ray start` (which parseStart holds to Ray's options): it takes
// --name=value, --name value and bare boolean --name, treats '_' and '-' in
// names alike, and warns about flags raysim does not implement instead of
// failing. It also holds parseStart's results.
type flagSet struct {
	cmd string
	// values and bools are the known flags, by normalised name.
	values map[string]bool // name -> takes a value
	short  map[string]string
	// entrypointAfterArg makes the first positional argument start the
	// trailing command (ray job submit).
	entrypointAfterArg bool

	got  map[string]string
	args []string
	rest []string
	warn io.Writer
}

func newFlagSet(cmd string, warn io.Writer) *flagSet {
	return &flagSet{cmd: cmd, values: map[string]bool{}, short: map[string]string{}, got: map[string]string{}, warn: warn}
}

func (f *flagSet) value(names ...string) *flagSet {
	for _, n := range names {
		f.values[n] = true
	}
	return f
}

func (f *flagSet) boolean(names ...string) *flagSet {
	for _, n := range names {
		f.values[n] = false
	}
	return f
}

func normalise(name string) string { return strings.ReplaceAll(strings.ToLower(name), "_", "-") }

func (f *flagSet) parse(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.rest = append(f.rest, args[i+1:]...)
			return nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if f.entrypointAfterArg {
				f.rest = append(f.rest, args[i:]...)
				return nil
			}
			f.args = append(f.args, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") {
			if long, ok := f.short[name]; ok {
				name = long
			}
		}
		name = normalise(name)
		takesValue, known := f.values[name]
		if !known {
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !f.entrypointAfterArg {
				val = args[i+1]
				i++
				fmt.Fprintf(f.warn, "raysim: warning: ray %s: ignoring %s %s (not implemented by raysim)\n", f.cmd, a, val)
			} else {
				fmt.Fprintf(f.warn, "raysim: warning: ray %s: ignoring %s (not implemented by raysim)\n", f.cmd, a)
			}
			continue
		}
		if takesValue {
			if !hasVal {
				if i+1 >= len(args) {
					return fmt.Errorf("ray %s: flag --%s needs a value", f.cmd, name)
				}
				val = args[i+1]
				i++
			}
			f.got[name] = val
			continue
		}
		if !hasVal {
			val = "true"
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("ray %s: flag --%s takes true or false, not %q", f.cmd, name, val)
		}
		f.got[name] = strconv.FormatBool(b)
	}
	return nil
}

func (f *flagSet) str(name string) string { return f.got[name] }

func (f *flagSet) has(name string) bool { _, ok := f.got[name]; return ok }

func (f *flagSet) isSet(name string) bool { return f.got[name] == "true" }

func (f *flagSet) intValue(name string, def int) (int, error) {
	v, ok := f.got[name]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("ray %s: --%s must be an integer, not %q", f.cmd, name, v)
	}
	return n, nil
}

func (f *flagSet) floatValue(name string) (float64, bool, error) {
	v, ok := f.got[name]
	if !ok || v == "" {
		return 0, false, nil
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false, fmt.Errorf("ray %s: --%s must be a number, not %q", f.cmd, name, v)
	}
	return x, true, nil
}
