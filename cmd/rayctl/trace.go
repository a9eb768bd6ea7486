package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/chain/render"
	"github.com/rayctl/rayctl/pkg/datadir"
)

// parseObjectArg reads KIND/NAME.
func parseObjectArg(arg string) (kind, name string, err error) {
	k, n, ok := strings.Cut(arg, "/")
	if !ok || k == "" || n == "" {
		return "", "", fmt.Errorf("want KIND/NAME (e.g. rayjob/my-job), got %q", arg)
	}
	kind, ok = chain.ParseKind(k)
	if !ok {
		return "", "", fmt.Errorf("unknown kind %q: the chain follows rayjob, rayservice, raycluster, pod, service, job, gateway and httproute", k)
	}
	return kind, n, nil
}

// connectCluster opens the data dir and connects as the cluster flags say: the REST config and the
// namespace they name.
func connectCluster(dataDir string, f *clusterFlags) (*rest.Config, string, error) {
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return nil, "", err
	}
	return f.connect(dir)
}

// isTerminal reports whether out is a terminal (for colour).
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type traceOptions struct {
	follow bool
	output string
}

func newTraceCommand(g *globalFlags) *cobra.Command {
	o := &traceOptions{}
	var cluster *clusterFlags
	cmd := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Show the trigger chain behind an object: each hop from the kubelet's write to the controller's action, with latencies",
		Long: `Show the causal timeline of an object, one hop a line: the kubelet's Pod status write, the API
server accepting it, each controller's informer event, predicate, mapping to its owner, the queue,
the Reconcile and what it wrote or called — back from a RayJob's submission to the write that made
its head Pod ready; for a RayService, back from its Serve deploy and from its latest state change
(applications RUNNING, serve endpoints), and during an incremental upgrade its latest HTTPRoute write
with the Gateway controller's hops it caused. Offsets are from the first hop; the second column is each
hop's own latency.

When no rayctl controller acts on the kind (rayctl up --controllers=none, with KubeRay's operator),
the chain is drawn from the API server's side: the kubelet's writes, every identity's writes of the
object and of the objects named after it (its RayCluster, Pods, Services, submitter Job and Pod), the
watch event that carried each write to the next actor (delivered to its watch, by identity), the
calls the API server proxied to its dashboard; the operator's own hops (its cache, queue and
reconciles) are out of sight and marked ┆.`,
		Example: `  rayctl trace rayjob/rayjob-sample
  rayctl trace raycluster/raycluster-sample -n team-a --follow
  rayctl trace pod/raycluster-sample-head-x7k2p -o json
  rayctl trace rayservice/rayservice-sample`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseObjectArg(args[0])
			if err != nil {
				return err
			}
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", o.output)
			}
			cfg, ns, err := connectCluster(g.dataDir, cluster)
			if err != nil {
				return err
			}
			c, err := chainhttp.NewClient(cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			ropts := render.Options{Color: isTerminal(out)}
			if o.follow {
				fromAPI, err := chain.External(cmd.Context(), c, kind)
				if err != nil {
					return err
				}
				trace := chain.Trace
				if fromAPI {
					trace = chain.APITrace
				}
				return followTrace(cmd.Context(), out, c, trace, kind, ns, name, o.output == "json", ropts)
			}
			steps, fromAPI, err := traceSteps(cmd.Context(), c, kind, ns, name)
			if err != nil {
				return err
			}
			if len(steps) == 0 {
				return fmt.Errorf("no hops recorded for %s %s/%s (the recorder keeps the newest events since rayctl up started; check the name, or use --follow)", kind, ns, name)
			}
			if o.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(steps)
			}
			// The span runs from the first change (not a requeue merged in on the way).
			first := steps[0].At
			for _, s := range steps {
				if s.Hop != chain.EnqueueHop {
					first = s.At
					break
				}
			}
			span := time.Duration(steps[len(steps)-1].At - first)
			fmt.Fprintf(out, "%s %s/%s: %d hops over %.1f ms\n", kind, ns, name, len(steps), float64(span)/1e6)
			if fromAPI {
				fmt.Fprintln(out, "No rayctl controller acts on it: the chain is drawn from what crossed the API server (writes by each identity, the watch events delivered to each, proxied dashboard calls); the operator's own hops (┆) are out of its sight.")
			}
			render.Render(out, steps, ropts)
			return nil
		},
	}
	cluster = addClusterFlags(cmd, "default")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing hops as they happen")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text, or json (one step a line with --follow)")
	return cmd
}

// traceSteps is the object's trace: the recorder's causal one when a rayctl controller acts on its
// kind, else (an operator outside rayctl, e.g. under rayctl up --controllers=none) the one drawn from
// the API server's side (fromAPI).
func traceSteps(ctx context.Context, c chain.Source, kind, ns, name string) (steps []chain.Step, fromAPI bool, err error) {
	if fromAPI, err = chain.External(ctx, c, kind); err != nil || !fromAPI {
		if err == nil {
			steps, err = c.Trace(ctx, kind, ns, name)
		}
		return steps, false, err
	}
	// All namespaces: a watch of all of them has none.
	list, err := c.Events(ctx, chain.Filter{})
	if err != nil {
		return nil, false, err
	}
	return chain.APITrace(list.Events, kind, ns, name), true, nil
}

// followTrace prints the trace as it grows: it keeps every event, recomputes the trace after each
// burst, and prints the steps it has not printed yet.
func followTrace(ctx context.Context, out io.Writer, c chain.Source, trace func([]chain.Event, string, string, string) []chain.Step,
	kind, ns, name string, asJSON bool, ropts render.Options) error {
	feed, err := chain.Tail(ctx, c, chain.Filter{}, 1024)
	if err != nil {
		return err
	}
	var events chain.Window
	events.Add(feed.List.Size, feed.List.Events...)
	printed := map[uint64]bool{}
	var t0 int64 = -1
	flush := func() {
		steps := trace(events.Events(), kind, ns, name)
		at := map[uint64]int64{}
		for _, s := range steps {
			at[s.Seq] = s.At
		}
		for _, s := range steps {
			if printed[s.Seq] {
				continue
			}
			printed[s.Seq] = true
			if asJSON {
				_ = json.NewEncoder(out).Encode(s)
				continue
			}
			if t0 < 0 {
				t0 = s.At
			}
			latency := ""
			if c, ok := at[s.Cause]; ok && s.Cause != 0 {
				latency = fmt.Sprintf("%.1f ms", float64(max(s.At-c, 0))/1e6)
			}
			if s.Unseen != "" {
				render.RenderUnseen(out, s.Unseen, ropts)
			}
			render.RenderLine(out, time.Duration(s.At-t0), latency, &s.Event, ropts)
		}
	}
	flush()
	if !asJSON {
		fmt.Fprintf(out, "… following %s %s/%s (Ctrl-C stops)\n", kind, ns, name)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	dirty := false
	for {
		select {
		case e := <-feed.C:
			events.Add(feed.List.Size, e)
			dirty = true
		case <-tick.C:
			if dirty {
				flush()
				dirty = false
			}
		case err := <-feed.Err:
			flush()
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-ctx.Done():
			return nil
		}
	}
}
