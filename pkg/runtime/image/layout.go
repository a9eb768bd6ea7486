// Package image writes local OCI images: an OCI image layout (oci-layout,
// index.json, blobs/sha256/…) packed in one tar stream that containerd's
// Import (and `ctr image import`) reads with no registry involved.
package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Media types and annotations of the OCI image spec and containerd.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationContainerdName names the image when containerd imports the index entry.
	AnnotationContainerdName = "io.containerd.image.name"
	// AnnotationRefName is the OCI tag annotation.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// epoch is the timestamp of every tar entry, so builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is an image's OS and CPU architecture.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Config is the part of the OCI image configuration raysim's image sets.
type Config struct {
	Created      string        `json:"created,omitempty"`
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       RuntimeConfig `json:"config"`
	RootFS       RootFS        `json:"rootfs"`
	History      []History     `json:"history,omitempty"`
}

// RuntimeConfig holds the defaults a container of the image runs with.
type RuntimeConfig struct {
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	User       string            `json:"User,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// RootFS lists the uncompressed layer digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History is one entry of the image history.
type History struct {
	Created   string `json:"created,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// Layer is a compressed layer stored in a file.
type Layer struct {
	// Path holds the gzip-compressed tar.
	Path string
	// Digest and Size describe the compressed file; DiffID is the sha256 of
	// the uncompressed tar.
	Digest, DiffID string
	Size           int64
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// WriteLayout writes a one-image OCI layout tar to w: the config (its
// rootfs.diff_ids are filled from layers), the layers and a manifest, named
// ref through the index entry's annotations. It returns the manifest digest.
func WriteLayout(w io.Writer, ref string, cfg Config, layers []Layer) (string, error) {
	cfg.RootFS = RootFS{Type: "layers"}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.DiffID)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	m := manifest{SchemaVersion: 2, MediaType: MediaTypeManifest,
		Config: Descriptor{MediaType: MediaTypeConfig, Digest: digestOf(cfgJSON), Size: int64(len(cfgJSON))}}
	for _, l := range layers {
		m.Layers = append(m.Layers, Descriptor{MediaType: MediaTypeLayerGz, Digest: l.Digest, Size: l.Size})
	}
	manJSON, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	manDigest := digestOf(manJSON)
	ann := map[string]string{AnnotationContainerdName: ref}
	if tag := refTag(ref); tag != "" {
		ann[AnnotationRefName] = tag
	}
	idx := index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{{
		MediaType: MediaTypeManifest, Digest: manDigest, Size: int64(len(manJSON)),
		Platform: &Platform{Architecture: cfg.Architecture, OS: cfg.OS}, Annotations: ann,
	}}}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return "", err
	}

	tw := tar.NewWriter(w)
	dirs := []string{"blobs/", "blobs/sha256/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return "", err
		}
	}
	writeBytes := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := writeBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return "", err
	}
	if err := writeBytes("blobs/sha256/"+hexOf(digestOf(cfgJSON)), cfgJSON); err != nil {
		return "", err
	}
	for _, l := range layers {
		f, err := os.Open(l.Path)
		if err != nil {
			return "", err
		}
		err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "blobs/sha256/" + hexOf(l.Digest), Mode: 0o644, Size: l.Size, ModTime: epoch, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return "", fmt.Errorf("writing layer %s: %w", l.Digest, err)
		}
	}
	if err := writeBytes("blobs/sha256/"+hexOf(manDigest), manJSON); err != nil {
		return "", err
	}
	if err := writeBytes("index.json", idxJSON); err != nil {
		return "", err
	}
	return manDigest, tw.Close()
}

func hexOf(digest string) string { return digest[len("sha256:"):] }

// refTag returns the tag of a reference ("repo:tag"), or "".
func refTag(ref string) string {
	for i := len(ref) - 1; i >= 0; i-- {
		switch ref[i] {
		case ':':
			return ref[i+1:]
		case '/':
			return ""
		}
	}
	return ""
}
