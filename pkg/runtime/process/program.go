package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// isSimImage reports whether ref is raysim's image.
func isSimImage(ref string) bool { return strings.Contains(ref, "raysim") }

// isRayImage reports whether ref is one of Ray's own images (rayproject/ray,
// rayproject/ray-ml, …).
func isRayImage(ref string) bool { return hostray.RunsImage(ref) }

// submitterImage is the repository of KubeRay's light-weight RayJob submitter image, whose /submitter
// this runtime runs as rayctl's own (pkg/raysubmitter: rayctl invoked as `submitter`).
const submitterImage = "quay.io/kuberay/submitter"

// isSubmitterImage reports whether ref is KubeRay's light-weight submitter image, at any tag or digest.
func isSubmitterImage(ref string) bool {
	repo, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return repo == submitterImage
}

// noted is a copy of img with what this runtime tells about running it (see imageNotes).
func (r *Runtime) noted(img *runtime.Image) *runtime.Image {
	c := *img
	c.Notes = r.imageNotes(img.Ref)
	return &c
}

// imageNotes says which Ray runs an image of Ray's or raysim's, and warns when the image's tag names
// another Ray version than the host's.
func (r *Runtime) imageNotes(ref string) []runtime.Note {
	switch {
	case isSubmitterImage(ref):
		return []runtime.Note{{Reason: "Submitter", Message: "rayctl's light-weight RayJob submitter runs image " + ref + "'s /submitter"}}
	case isSimImage(ref):
		return []runtime.Note{{Reason: "RaySim", Message: "raysim (rayctl's offline stand-in for Ray) runs image " + ref}}
	case !isRayImage(ref):
		return nil
	case r.hostRay == nil:
		return []runtime.Note{{Warning: true, Reason: "RaySim", Message: "raysim (rayctl's offline stand-in for Ray) runs image " + ref + ", not Ray: no host Ray is in use (make ray installs one; rayctl up --ray=sim asks for raysim)"}}
	}
	notes := []runtime.Note{{Reason: "HostRay", Message: r.hostRay.String() + " runs image " + ref + " as host processes"}}
	if v := imageRayVersion(ref); v != "" && v != r.hostRay.Version {
		notes = append(notes, runtime.Note{Warning: true, Reason: "RayVersionMismatch",
			Message: fmt.Sprintf("image %s is Ray %s, but the host's Ray %s runs it", ref, v, r.hostRay.Version)})
	}
	return notes
}

// rayTag is the Ray version at the start of a Ray image's tag: rayproject/ray:2.46.0-py310-gpu → 2.46.0.
var rayTag = regexp.MustCompile(`:([0-9]+\.[0-9]+\.[0-9]+)`)

// imageRayVersion is the Ray version an image's tag names, or "" (latest, nightly, a digest).
func imageRayVersion(ref string) string {
	if m := rayTag.FindStringSubmatch(ref); m != nil {
		return m[1]
	}
	return ""
}

// program is what a container runs on the host.
type program struct {
	// Path is the executable; Args its argv (Args[0] may differ from Path:
	// raysim is this binary run as "ray").
	Path string
	Args []string
	// SimOnPath says `ray` inside shell commands must be raysim, so the
	// runtime's bin dir (with a `ray` link to raysim) goes first in PATH.
	SimOnPath bool
	// RayBinDir, for Ray's images run on the host's Ray, goes first in PATH, so that `python` and
	// `ray` in shell commands are the host Ray's.
	RayBinDir string
	// Warning tells the user about a stand-in (shown as the container's message).
	Warning string
}

// isExecutable says path is a file someone may run.
func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// resolve maps a container's argv onto host programs: `ray` becomes raysim
// for raysim's image (and for Ray's images when the host has no ray), a
// path absent on the host is looked up by its base name in PATH.
func (r *Runtime) resolve(ref string, argv []string) (*program, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command: neither the container nor its image (%s) gives one", ref)
	}
	useSim := isSimImage(ref) || r.hostRay == nil
	p := &program{Args: append([]string{}, argv...), SimOnPath: useSim}
	if isSubmitterImage(ref) && argv[0] == "/submitter" {
		p.Path, p.Args[0] = r.rayBinary, "submitter"
		return p, nil
	}
	if isRayImage(ref) && r.hostRay == nil {
		p.Warning = "image " + ref + ": no host Ray is in use, so raysim (rayctl's offline stand-in for Ray) runs instead"
	}
	base := filepath.Base(argv[0])
	if base == "ray" && useSim {
		p.Path, p.Args[0] = r.rayBinary, "ray"
		return p, nil
	}
	if isRayImage(ref) && r.hostRay != nil {
		// Ray's programs (ray, python, serve, pip …) are the host Ray's environment's.
		p.RayBinDir = r.hostRay.BinDir
		if found := filepath.Join(r.hostRay.BinDir, base); isExecutable(found) {
			p.Path = found
			return p, nil
		}
	}
	if strings.Contains(argv[0], "/") {
		if _, err := os.Stat(argv[0]); err == nil {
			p.Path = argv[0]
			return p, nil
		}
	}
	found, err := exec.LookPath(base)
	if err != nil {
		hint := ""
		if r.notFoundHint != "" && !isRayImage(ref) && !isSimImage(ref) {
			hint = "; " + r.notFoundHint
		}
		return nil, fmt.Errorf("%s: not found on this host (the process runtime runs host programs%s): %w", argv[0], hint, err)
	}
	p.Path = found
	return p, nil
}
