package process

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// images are virtual here: nothing is pulled or unpacked, an image only
// decides which host program runs. Imported tarballs contribute their
// names and configs (entrypoint, cmd, env, working dir).
type imageStore struct {
	path string
	mu   sync.Mutex
}

func (s *imageStore) load() (map[string]*runtime.Image, error) {
	out := map[string]*runtime.Image{}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(b, &out)
}

func (s *imageStore) save(m map[string]*runtime.Image) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(s.path+".tmp", s.path)
}

// virtualImage describes an image never imported: its ID is derived from the
// reference, and raysim's image gets raysim's default command.
func virtualImage(ref string) *runtime.Image {
	sum := sha256.Sum256([]byte(ref))
	img := &runtime.Image{Ref: ref, ID: "sha256:" + hex.EncodeToString(sum[:]), WorkingDir: ""}
	if isSimImage(ref) {
		img.Cmd = []string{"/bin/sh"}
	}
	return img
}

// EnsureImage records the image; nothing is pulled. Pull policies make no
// difference: every image is "present".
func (r *Runtime) EnsureImage(_ context.Context, ref string, _ runtime.PullPolicy, progress func(string)) (*runtime.Image, error) {
	r.images.mu.Lock()
	defer r.images.mu.Unlock()
	m, err := r.images.load()
	if err != nil {
		return nil, err
	}
	if img, ok := m[ref]; ok {
		return r.noted(img), nil
	}
	img := r.noted(virtualImage(ref))
	if progress != nil {
		msg := "its commands run with the host's programs"
		if len(img.Notes) > 0 {
			msg = img.Notes[0].Message
		}
		progress("process runtime: image " + ref + " is not pulled; " + msg)
	}
	m[ref] = img
	return img, r.images.save(m)
}

// ImportImage reads an OCI image layout tarball's index, manifests and
// configs (its layers are skipped) and records the images it names.
func (r *Runtime) ImportImage(_ context.Context, tarball io.Reader) ([]string, error) {
	blobs := map[string][]byte{}
	var index []byte
	tr := tar.NewReader(tarball)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading image tarball: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			if index, err = io.ReadAll(io.LimitReader(tr, 1<<20)); err != nil {
				return nil, err
			}
		case strings.HasPrefix(name, "blobs/sha256/") && h.Size < 1<<20:
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")] = b
		}
	}
	if index == nil {
		return nil, errors.New("image tarball has no index.json (only OCI image layouts are read by the process runtime)")
	}
	type descriptor struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	r.images.mu.Lock()
	defer r.images.mu.Unlock()
	m, err := r.images.load()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range idx.Manifests {
		name := d.Annotations["io.containerd.image.name"]
		if name == "" {
			continue
		}
		img := &runtime.Image{Ref: name, ID: d.Digest}
		var man struct {
			Config descriptor `json:"config"`
		}
		if err := json.Unmarshal(blobs[d.Digest], &man); err == nil {
			var cfg struct {
				Config struct {
					Entrypoint, Cmd, Env []string
					WorkingDir, User     string
				} `json:"config"`
			}
			if err := json.Unmarshal(blobs[man.Config.Digest], &cfg); err == nil {
				c := cfg.Config
				img.Entrypoint, img.Cmd, img.Env, img.WorkingDir, img.User = c.Entrypoint, c.Cmd, c.Env, c.WorkingDir, c.User
			}
		}
		m[name] = img
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, errors.New("image tarball names no image (no io.containerd.image.name annotation in its index)")
	}
	return names, r.images.save(m)
}

// ListImages lists the images imported or ensured so far.
func (r *Runtime) ListImages(context.Context) ([]*runtime.Image, error) {
	r.images.mu.Lock()
	defer r.images.mu.Unlock()
	m, err := r.images.load()
	if err != nil {
		return nil, err
	}
	out := make([]*runtime.Image, 0, len(m))
	for _, img := range m {
		out = append(out, r.noted(img))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

func newImageStore(dir string) *imageStore {
	return &imageStore{path: filepath.Join(dir, "images.json")}
}
