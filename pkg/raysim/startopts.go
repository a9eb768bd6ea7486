package raysim

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// optKind is how a `ray start` option takes its value, as Ray's click options do.
type optKind int

const (
	optFlag   optKind = iota // no value: --head
	optInt                   // an integer
	optFloat                 // a number
	optText                  // any string
	optBool                  // true/false, yes/no, 1/0, on/off …
	optChoice                // one of choices
	optJSON                  // a JSON value
	optCount                 // -v, -vv: counted
)

// startOption is one option of Ray 2.60's `ray start`.
type startOption struct {
	name    string
	kind    optKind
	choices []string
	// used says raysim acts on the option; the others are accepted with a warning.
	used bool
}

// rayStartOptions are every option Ray 2.60's `ray start` accepts (its hidden ones too), so that a
// command line real Ray refuses is refused here as well, and one it takes is taken.
var rayStartOptions = []startOption{
	{name: "node-ip-address", kind: optText, used: true},
	{name: "address", kind: optText, used: true},
	{name: "port", kind: optInt, used: true},
	{name: "node-name", kind: optText},
	{name: "redis-username", kind: optText, used: true}, // the head's external Redis (RAY_REDIS_ADDRESS)
	{name: "redis-password", kind: optText, used: true},
	{name: "redis-shard-ports", kind: optText},
	{name: "object-manager-port", kind: optInt},
	{name: "node-manager-port", kind: optInt},
	{name: "min-worker-port", kind: optInt},
	{name: "max-worker-port", kind: optInt},
	{name: "worker-port-list", kind: optText},
	{name: "ray-client-server-port", kind: optInt},
	{name: "memory", kind: optInt, used: true},
	{name: "object-store-memory", kind: optInt, used: true},
	{name: "num-cpus", kind: optInt, used: true},
	{name: "num-gpus", kind: optInt, used: true},
	{name: "resources", kind: optText, used: true},
	{name: "head", kind: optFlag, used: true},
	{name: "include-dashboard", kind: optBool},
	{name: "dashboard-host", kind: optText, used: true},
	{name: "dashboard-port", kind: optInt, used: true},
	{name: "dashboard-agent-listen-port", kind: optInt, used: true},
	{name: "dashboard-agent-grpc-port", kind: optInt},
	{name: "runtime-env-agent-port", kind: optInt},
	{name: "block", kind: optFlag, used: true},
	{name: "plasma-directory", kind: optText},
	{name: "object-spilling-directory", kind: optText},
	{name: "autoscaling-config", kind: optText},
	{name: "no-redirect-output", kind: optFlag},
	{name: "temp-dir", kind: optText, used: true},
	{name: "system-config", kind: optJSON},
	{name: "enable-object-reconstruction", kind: optFlag},
	{name: "metrics-export-port", kind: optInt, used: true},
	{name: "no-monitor", kind: optFlag},
	{name: "tracing-startup-hook", kind: optText},
	{name: "ray-debugger-external", kind: optFlag},
	{name: "disable-usage-stats", kind: optFlag, used: true}, // raysim collects no usage stats anyway
	{name: "labels", kind: optText},
	{name: "labels-file", kind: optText},
	{name: "include-log-monitor", kind: optBool},
	{name: "enable-resource-isolation", kind: optFlag},
	{name: "system-reserved-cpu", kind: optFloat},
	{name: "system-reserved-memory", kind: optInt},
	{name: "cgroup-path", kind: optText},
	{name: "proxy-server-url", kind: optText},
	{name: "log-style", kind: optChoice, choices: []string{"auto", "record", "pretty"}},
	{name: "log-color", kind: optChoice, choices: []string{"auto", "false", "true"}},
	{name: "verbose", kind: optCount},
}

// usageError is a command line `ray start` refuses, as click does: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// startArgs is a parsed `ray start` command line.
type startArgs struct {
	*flagSet
	help bool
}

// parseStart parses a `ray start` command line the way Ray's CLI (click) does: option names exactly as
// Ray spells them (dashes, not underscores), --name=value or --name value, flags without a value, every
// value checked against its option's type; anything else is a usageError. Options raysim does not act
// on are accepted with a warning on warn.
func parseStart(args []string, warn io.Writer) (*startArgs, error) {
	opts := map[string]startOption{}
	for _, o := range rayStartOptions {
		opts[o.name] = o
	}
	f := newFlagSet("start", warn)
	out := &startArgs{flagSet: f}
	var given []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--help":
			out.help = true
			continue
		case a == "--":
			if i+1 < len(args) {
				return nil, &usageError{fmt.Sprintf("Got unexpected extra argument (%s)", args[i+1])}
			}
			continue
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1:
			if strings.Trim(a[1:], "v") != "" {
				return nil, &usageError{fmt.Sprintf("No such option: %s", a)}
			}
			n, _ := strconv.Atoi(f.got["verbose"])
			f.got["verbose"] = strconv.Itoa(n + len(a) - 1)
			continue
		case !strings.HasPrefix(a, "--"):
			return nil, &usageError{fmt.Sprintf("Got unexpected extra argument (%s)", a)}
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		o, ok := opts[name]
		if !ok {
			return nil, &usageError{fmt.Sprintf("No such option '--%s'.", name)}
		}
		switch o.kind {
		case optFlag, optCount:
			if hasVal {
				return nil, &usageError{fmt.Sprintf("Option '--%s' does not take a value.", name)}
			}
			if o.kind == optCount {
				n, _ := strconv.Atoi(f.got[name])
				val = strconv.Itoa(n + 1)
			} else {
				val = "true"
			}
		default:
			if !hasVal {
				if i+1 >= len(args) {
					return nil, &usageError{fmt.Sprintf("Option '--%s' requires an argument.", name)}
				}
				i++
				val = args[i]
			}
		}
		f.got[name] = val
		given = append(given, name)
	}
	if out.help {
		return out, nil
	}
	for _, name := range given {
		o := opts[name]
		if err := checkValue(o, f.got[name]); err != nil {
			return nil, err
		}
		if o.kind == optBool {
			f.got[name] = strconv.FormatBool(parseClickBool(f.got[name]) == 1)
		}
		if !o.used {
			fmt.Fprintf(warn, "raysim: warning: ray start: ignoring --%s (not implemented by raysim)\n", name)
		}
	}
	return out, nil
}

// checkValue checks v against o's type, with click's wording when it does not fit.
func checkValue(o startOption, v string) error {
	bad := func(what string) error {
		return &usageError{fmt.Sprintf("Invalid value for '--%s': '%s' is not %s.", o.name, v, what)}
	}
	switch o.kind {
	case optInt:
		if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return bad("a valid integer")
		}
	case optFloat:
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return bad("a valid float")
		}
	case optBool:
		if parseClickBool(v) < 0 {
			return &usageError{fmt.Sprintf("Invalid value for '--%s': '%s' is not a valid boolean. Recognized values: , 0, 1, f, false, n, no, off, on, t, true, y, yes", o.name, v)}
		}
	case optChoice:
		for _, c := range o.choices {
			if v == c {
				return nil
			}
		}
		return bad("one of '" + strings.Join(o.choices, "', '") + "'")
	case optJSON:
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return bad("valid JSON")
		}
	}
	return nil
}

// parseClickBool reads a boolean as click does: 1 for true, 0 for false, -1 for neither.
func parseClickBool(v string) int {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "t", "yes", "y", "on":
		return 1
	case "", "0", "false", "f", "no", "n", "off":
		return 0
	}
	return -1
}

// startUsageError writes a refused command line as click does (to stderr) and returns its exit code.
func startUsageError(w io.Writer, err error) int {
	fmt.Fprintf(w, "Usage: ray start [OPTIONS]\nTry 'ray start --help' for help.\n\nError: %s\n", err)
	return 2
}

// startHelp lists the options `ray start` takes, saying which raysim acts on.
func startHelp(w io.Writer) {
	fmt.Fprint(w, "Usage: ray start [OPTIONS]\n\n  Start a raysim node (an offline stand-in for Ray) on the local machine.\n\nOptions:\n")
	for _, o := range rayStartOptions {
		note := "accepted, ignored by raysim"
		if o.used {
			note = "used by raysim"
		}
		fmt.Fprintf(w, "  --%-30s %s\n", o.name, note)
	}
	fmt.Fprintf(w, "  --%-30s %s\n", "help", "Show this message and exit.")
}
