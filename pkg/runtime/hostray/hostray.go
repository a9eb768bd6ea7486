// Package hostray finds the Ray installed on this host (a `ray` executable of `ray[default]`) that the
// process runtime runs for Ray's images, and tells which version it is. It looks where the user says
// (a path), then in the virtual environment `make ray` makes beside rayctl (_output/ray), then on PATH.
// A `ray` that does not answer `ray --version`, or lacks the dashboard's extras (the Jobs API needs
// `ray[default]`, not bare `ray`), is not used, and Find says why.
package hostray

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Ray is a usable Ray installation.
type Ray struct {
	// Path is the `ray` executable.
	Path string `json:"path"`
	// BinDir holds it, and in a virtual environment also its python, serve and the rest: it goes first
	// in the PATH of Ray's containers, so that `python` there is the Python Ray is installed in.
	BinDir string `json:"binDir"`
	// Python is the interpreter of the `ray` script (its #! line).
	Python string `json:"python"`
	// Version is what `ray --version` says, e.g. "2.60.0".
	Version string `json:"version"`
}

// RunsImage reports whether ref is one of Ray's own images (rayproject/ray, rayproject/ray-ml, …),
// the images the host's Ray runs in their stead.
func RunsImage(ref string) bool { return strings.Contains(ref, "rayproject/ray") }

// String describes r for people: "host Ray 2.60.0 (/path/bin/ray)".
func (r *Ray) String() string { return fmt.Sprintf("host Ray %s (%s)", r.Version, r.Path) }

// Candidates are the places Find looks, in order: explicit (when set), the `make ray` virtual
// environment beside the rayctl executable (…/_output/bin/rayctl → …/_output/ray/bin/ray), and `ray` on
// PATH.
func Candidates(explicit string) []string {
	var out []string
	if explicit != "" {
		out = append(out, explicit)
	}
	if exe, err := os.Executable(); err == nil {
		out = append(out, BesideBinary(exe))
	}
	if p, err := exec.LookPath("ray"); err == nil {
		out = append(out, p)
	}
	return out
}

// BesideBinary is where `make ray` puts `ray` for the rayctl binary at bin: …/_output/bin/rayctl →
// …/_output/ray/bin/ray.
func BesideBinary(bin string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(bin)), "ray", "bin", "ray")
}

// ErrNotFound says no candidate is there at all.
var ErrNotFound = errors.New("no Ray on this host")

// Find returns the first candidate that is a working `ray[default]`. An explicit path (the first
// candidate when required is true) that does not work is an error, not skipped. cacheFile, when set,
// remembers the answer per executable for as long as the executable is unchanged, so that a start
// does not pay for Python's start twice (see CacheFile).
func Find(ctx context.Context, candidates []string, required bool, cacheFile string) (*Ray, error) {
	var problems []string
	for i, c := range candidates {
		st, err := os.Stat(c)
		if err != nil {
			if i == 0 && required {
				return nil, fmt.Errorf("ray at %s: %w", c, err)
			}
			continue
		}
		r, err := check(ctx, c, st, cacheFile)
		if err == nil {
			return r, nil
		}
		if i == 0 && required {
			return nil, err
		}
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return nil, ErrNotFound
	}
	return nil, fmt.Errorf("%w that works: %s", ErrNotFound, strings.Join(problems, "; "))
}

// CacheFile is where Find's answers are best remembered: a file in the user's cache directory
// ($XDG_CACHE_HOME/rayctl, else ~/.cache/rayctl), shared by every data dir, so that a new data dir
// does not check an unchanged Ray again (two Python starts, about two seconds of CPU, beside the
// control plane's own start). Without a user cache directory it is fallback.
func CacheFile(fallback string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return fallback
	}
	dir = filepath.Join(dir, "rayctl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fallback
	}
	return filepath.Join(dir, "hostray.json")
}

// cached is one answer the cache file holds: the Ray found at an executable of that size and time.
type cached struct {
	Ray
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
}

// readCache returns the answers cacheFile holds, by executable (none when it cannot be read).
func readCache(cacheFile string) map[string]cached {
	var m map[string]cached
	if b, err := os.ReadFile(cacheFile); err == nil && json.Unmarshal(b, &m) == nil && m != nil {
		return m
	}
	return map[string]cached{}
}

// remember adds r, found at an executable st describes, to cacheFile. The file is replaced whole (a
// temporary file renamed over it), so that rayctl instances starting at once never read half of one.
func remember(cacheFile string, r *Ray, st os.FileInfo) {
	m := readCache(cacheFile)
	m[r.Path] = cached{Ray: *r, Size: st.Size(), ModTime: st.ModTime()}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(cacheFile), ".hostray-*.json")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), cacheFile) != nil {
		os.Remove(tmp.Name())
	}
}

// versionLine is `ray --version`'s answer: "ray, version 2.60.0".
var versionLine = regexp.MustCompile(`ray, version ([0-9][0-9A-Za-z.+-]*)`)

// extras are modules of ray[default] the dashboard's Jobs API needs beyond bare ray.
const extras = "import aiohttp, aiohttp_cors, prometheus_client, pydantic, grpc"

func check(ctx context.Context, path string, st os.FileInfo, cacheFile string) (*Ray, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if cacheFile != "" {
		if c, ok := readCache(cacheFile)[abs]; ok && c.Path == abs && c.Size == st.Size() && c.ModTime.Equal(st.ModTime()) {
			return &c.Ray, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, abs, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v: %s", abs, err, lastLine(out))
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%s --version answered %q, not a Ray version", abs, lastLine(out))
	}
	r := &Ray{Path: abs, BinDir: filepath.Dir(abs), Python: interpreter(abs), Version: string(m[1])}
	if r.Python == "" {
		return nil, fmt.Errorf("%s: cannot tell which Python it runs in (no #! line)", abs)
	}
	if out, err := exec.CommandContext(ctx, r.Python, "-c", extras).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s is Ray %s without the dashboard's extras (install ray[default]): %s", abs, r.Version, lastLine(out))
	}
	if cacheFile != "" {
		remember(cacheFile, r, st)
	}
	return r, nil
}

// interpreter reads the #! line of a script.
func interpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		p, err := exec.LookPath(fields[1])
		if err != nil {
			return ""
		}
		return p
	}
	return fields[0]
}

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
