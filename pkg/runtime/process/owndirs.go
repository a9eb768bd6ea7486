package process

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// rayHome is the home (and working) dir of Ray's images, whose user is ray.
const rayHome = "/home/ray"

// defaultPath is a container's PATH when its image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// rayDefaults keep Ray quiet and offline unless the image or the pod says
// otherwise: no usage stats, no warning about Docker's CPU count.
var rayDefaults = []string{"RAY_USAGE_STATS_ENABLED=0", "RAY_DISABLE_DOCKER_CPU_WARNING=1"}

// containerEnv is a container's environment: PATH, HOSTNAME and HOME, Ray's
// defaults for Ray's images, then the image's env and the config's, each
// replacing what came before. rayctl's own environment is no part of it.
func containerEnv(cfg runtime.ContainerConfig, img *runtime.Image, hostname, home string) []string {
	base := []string{"PATH=" + defaultPath, "HOSTNAME=" + hostname, "HOME=" + home}
	if isRayImage(cfg.Image) {
		base = append(base, rayDefaults...)
	}
	return mergeEnv(base, img.Env, cfg.Env)
}

// ownDirs are a container's private dirs and how it sees them.
type ownDirs struct {
	// base holds them on the host: rt/<container>/ under the pod dir.
	base string
	// home is $HOME inside the container.
	home string
	// mounts put the private dirs at /tmp (and the home) when isolated.
	mounts []runtime.Mount
}

// privateDirs makes a container's own /tmp, and for Ray's images its home,
// under the pod dir (rt/<container>/), emptied at each creation as a
// container's writable layer is. The home belongs to the container's user
// (uid, gid; nil for rayctl's own). When isolated they are mounted at /tmp and
// /home/ray; otherwise only HOME points at the home dir (the host's /tmp is
// shared).
func (r *Runtime) privateDirs(sb *runtime.Sandbox, name string, uid, gid *int64, ray bool) (*ownDirs, error) {
	base := sb.Config.Dir
	if base == "" {
		base = filepath.Join(r.dir, "pods", sb.PodUID)
	}
	base = filepath.Join(base, "rt", name)
	if err := os.RemoveAll(base); err != nil {
		return nil, err
	}
	tmp, home := filepath.Join(base, "tmp"), filepath.Join(base, "home")
	for _, d := range []string{tmp, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		return nil, err
	}
	if uid != nil && os.Geteuid() == 0 {
		g := -1
		if gid != nil {
			g = int(*gid)
		}
		if err := os.Chown(home, int(*uid), g); err != nil {
			return nil, err
		}
	}
	own := &ownDirs{base: base, home: "/root"}
	if uid != nil && *uid != 0 {
		own.home = "/"
	}
	if !r.isolated {
		if ray {
			own.home = home
		}
		return own, nil
	}
	own.mounts = []runtime.Mount{{HostPath: tmp, ContainerPath: "/tmp"}}
	if ray {
		own.home = rayHome
		own.mounts = append(own.mounts, runtime.Mount{HostPath: home, ContainerPath: rayHome})
	}
	return own, nil
}

// writeAccountFiles writes the /etc/passwd and /etc/group of a container
// running as u (see accountFiles) into base, and returns their mounts. The
// user is "ray" in Ray's images, as in theirs.
func writeAccountFiles(base string, u User, ray bool, home string) ([]runtime.Mount, error) {
	name := podUserName
	if ray {
		name = rayUserName
	}
	if home == "" {
		home = "/"
	}
	passwd, group := accountFiles(u, name, home)
	var out []runtime.Mount
	for _, f := range []struct {
		name string
		data []byte
	}{{"passwd", passwd}, {"group", group}} {
		p := filepath.Join(base, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
		out = append(out, runtime.Mount{HostPath: p, ContainerPath: "/etc/" + f.name, ReadOnly: true})
	}
	return out, nil
}

// simBinDir is where an isolated container finds raysim as `ray`: a dir in
// its private /tmp (so nothing is made on the host's filesystem), with raysim's
// binary bind-mounted at ray. The runtime's own bin dir will not do: it is
// under rayctl's data dir, which a container's unprivileged user may not enter.
const simBinDir = "/tmp/.rayctl/bin"

// simDir is the dir with `ray` (raysim) that goes first in PATH.
func (r *Runtime) simDir() string {
	if r.isolated {
		return simBinDir
	}
	return r.binDir
}

// containerProgram returns the mounts an isolated container needs to run p
// (host paths under the host's /tmp, which the private /tmp hides, and
// this binary at simBinDir), and points p at that path when p is this binary
// (raysim, or the RayJob submitter). Elsewhere p runs as it is, with no mounts.
func (r *Runtime) containerProgram(p *program) []runtime.Mount {
	if !r.isolated {
		return nil
	}
	var paths []string
	if p.Path != r.rayBinary {
		paths = append(paths, p.Path)
	}
	if p.RayBinDir != "" {
		paths = append(paths, rayEnvironment(p.RayBinDir))
	}
	ms := keepUnderTmp(paths...)
	if p.SimOnPath || p.Path == r.rayBinary {
		// raysim for `ray` on PATH, or this binary run as the program itself (raysim, the submitter).
		ms = append(ms, runtime.Mount{HostPath: r.rayBinary, ContainerPath: path.Join(simBinDir, "ray"), ReadOnly: true})
	}
	if p.Path == r.rayBinary {
		p.Path = path.Join(simBinDir, "ray")
	}
	return ms
}

// rayEnvironment is what a container needs of the host Ray in binDir: the whole virtual environment
// (its lib holds Ray itself) when binDir is a venv's, else binDir.
func rayEnvironment(binDir string) string {
	if root := filepath.Dir(binDir); fileExists(filepath.Join(root, "pyvenv.cfg")) {
		return root
	}
	return binDir
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// keepUnderTmp mounts those of paths that lie under the host's /tmp back at
// their own paths, read-only, since the container's private /tmp hides them.
func keepUnderTmp(paths ...string) []runtime.Mount {
	var out []runtime.Mount
	seen := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if !strings.HasPrefix(p, "/tmp/") || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, runtime.Mount{HostPath: p, ContainerPath: p, ReadOnly: true})
	}
	return out
}
