// Package volume materialises a pod's volumes on the host, under the pod's own directory, and turns a
// container's volumeMounts into bind mounts for the runtime. Supported: emptyDir (medium Memory is a
// tmpfs when running as root on Linux, else a plain directory), configMap, secret, downwardAPI,
// projected (configMap, secret, downwardAPI and serviceAccountToken sources, the last through
// TokenRequest, bound to the pod; clusterTrustBundle and podCertificate sources are skipped), hostPath,
// and persistentVolumeClaim bound to a hostPath or local PersistentVolume (its directory, bind-mounted).
package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// Paths maps each volume name to its host path.
type Paths map[string]string

// Setup makes every volume of in.Pod under dir (dir/<volume name>; hostPath volumes stay where they
// are) and returns their paths, and when Setup must run again to renew the tokens it wrote (at 80% of
// their lifetime, as the kubelet renews them; zero when there are none). It can be called again: files
// are rewritten with current contents, each replaced at once.
func Setup(ctx context.Context, in podenv.Input, dir string) (Paths, time.Time, error) {
	paths := Paths{}
	var renew time.Time
	for _, v := range in.Pod.Spec.Volumes {
		p, at, err := setupOne(ctx, in, dir, v)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		paths[v.Name] = p
		if !at.IsZero() && (renew.IsZero() || at.Before(renew)) {
			renew = at
		}
	}
	return paths, renew, nil
}

func setupOne(ctx context.Context, in podenv.Input, dir string, v corev1.Volume) (string, time.Time, error) {
	if v.Projected != nil {
		return projected(ctx, in, filepath.Join(dir, v.Name), v.Projected)
	}
	p, err := setupPlain(ctx, in, dir, v)
	return p, time.Time{}, err
}

func setupPlain(ctx context.Context, in podenv.Input, dir string, v corev1.Volume) (string, error) {
	target := filepath.Join(dir, v.Name)
	src := v.VolumeSource
	switch {
	case src.HostPath != nil:
		return hostPath(src.HostPath)
	case src.PersistentVolumeClaim != nil:
		return claimPath(ctx, in, src.PersistentVolumeClaim.ClaimName)
	case src.EmptyDir != nil:
		return target, emptyDir(target, src.EmptyDir)
	case src.ConfigMap != nil:
		files, err := configMapFiles(ctx, in, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, src.ConfigMap.DefaultMode)
		if err != nil {
			return "", err
		}
		return target, writeFiles(target, files)
	case src.Secret != nil:
		files, err := secretFiles(ctx, in, src.Secret.SecretName, src.Secret.Items, src.Secret.Optional, src.Secret.DefaultMode)
		if err != nil {
			return "", err
		}
		return target, writeFiles(target, files)
	case src.DownwardAPI != nil:
		files, err := downwardFiles(in, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
		if err != nil {
			return "", err
		}
		return target, writeFiles(target, files)
	}
	return "", errors.New("unsupported volume type")
}

// projected writes a projected volume's sources into target, and says when its tokens need renewing.
func projected(ctx context.Context, in podenv.Input, target string, src *corev1.ProjectedVolumeSource) (string, time.Time, error) {
	var all []file
	var renew time.Time
	for _, p := range src.Sources {
		var files []file
		var err error
		switch {
		case p.ConfigMap != nil:
			files, err = configMapFiles(ctx, in, p.ConfigMap.Name, p.ConfigMap.Items, p.ConfigMap.Optional, src.DefaultMode)
		case p.Secret != nil:
			files, err = secretFiles(ctx, in, p.Secret.Name, p.Secret.Items, p.Secret.Optional, src.DefaultMode)
		case p.DownwardAPI != nil:
			files, err = downwardFiles(in, p.DownwardAPI.Items, src.DefaultMode)
		case p.ServiceAccountToken != nil:
			var f file
			var at time.Time
			f, at, err = tokenFile(ctx, in, p.ServiceAccountToken, src.DefaultMode)
			files = []file{f}
			if renew.IsZero() || at.Before(renew) {
				renew = at
			}
		default:
			// clusterTrustBundle and podCertificate sources are not served here.
		}
		if err != nil {
			return "", time.Time{}, err
		}
		all = append(all, files...)
	}
	return target, renew, writeFiles(target, all)
}

// defaultTokenSeconds is a serviceAccountToken projection's lifetime when it names none.
const defaultTokenSeconds = 3600

// tokenFile asks for a token of the pod's service account, bound to the pod, and says when to renew it:
// at 80% of its lifetime.
func tokenFile(ctx context.Context, in podenv.Input, p *corev1.ServiceAccountTokenProjection, def *int32) (file, time.Time, error) {
	pod := in.Pod
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	seconds := int64(defaultTokenSeconds)
	if p.ExpirationSeconds != nil {
		seconds = *p.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	asked := time.Now()
	tr, err := in.Sources.ServiceAccountToken(ctx, pod.Namespace, account, req)
	if err != nil {
		return file{}, time.Time{}, fmt.Errorf("requesting a token of service account %q: %w", account, err)
	}
	lifetime := tr.Status.ExpirationTimestamp.Sub(asked)
	return file{path: p.Path, data: []byte(tr.Status.Token), mode: modeOf(nil, def)}, asked.Add(lifetime * 8 / 10), nil
}

// claimPath is the host directory of the volume bound to claim name: a hostPath volume (made when its
// type asks) or a local one. A claim not bound yet is an error the pod worker retries.
func claimPath(ctx context.Context, in podenv.Input, name string) (string, error) {
	claim, err := in.Sources.PersistentVolumeClaim(ctx, in.Pod.Namespace, name)
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q: %w", name, err)
	}
	if claim.DeletionTimestamp != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q is being deleted", name)
	}
	if claim.Spec.VolumeName == "" || claim.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("persistentvolumeclaim %q is not bound", name)
	}
	pv, err := in.Sources.PersistentVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("persistentvolume %q of claim %q: %w", claim.Spec.VolumeName, name, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		return "", fmt.Errorf("persistentvolume %q is not bound to claim %q", pv.Name, name)
	}
	switch {
	case pv.Spec.HostPath != nil:
		return hostPath(pv.Spec.HostPath)
	case pv.Spec.Local != nil:
		return hostPath(&corev1.HostPathVolumeSource{Path: pv.Spec.Local.Path})
	}
	return "", fmt.Errorf("persistentvolume %q: only hostPath and local volumes can be mounted on this node", pv.Name)
}

func hostPath(h *corev1.HostPathVolumeSource) (string, error) {
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		return h.Path, os.MkdirAll(h.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
			return "", err
		}
		f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return "", err
		}
		return h.Path, f.Close()
	case corev1.HostPathDirectory, corev1.HostPathFile:
		fi, err := os.Stat(h.Path)
		if err != nil {
			return "", err
		}
		if fi.IsDir() != (t == corev1.HostPathDirectory) {
			return "", fmt.Errorf("hostPath %s is not a %s", h.Path, strings.ToLower(string(t)))
		}
	}
	return h.Path, nil
}

func emptyDir(target string, e *corev1.EmptyDirVolumeSource) error {
	if err := os.MkdirAll(target, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(target, 0o777); err != nil {
		return err
	}
	if e.Medium != corev1.StorageMediumMemory || !tmpfsHere || os.Geteuid() != 0 || isMountPoint(target) {
		return nil
	}
	opts := "mode=0777"
	if e.SizeLimit != nil && !e.SizeLimit.IsZero() {
		opts += fmt.Sprintf(",size=%d", e.SizeLimit.Value())
	}
	if err := mountTmpfs(target, opts); err != nil {
		return fmt.Errorf("mounting tmpfs: %w", err)
	}
	return nil
}

// isMountPoint reports whether path is on another device than its parent.
func isMountPoint(path string) bool {
	var st, parent unix.Stat_t
	if unix.Stat(path, &st) != nil || unix.Stat(filepath.Dir(path), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// Teardown unmounts any tmpfs under dir and removes dir.
func Teardown(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() && isMountPoint(p) {
			if err := unmountDetached(p); err != nil {
				return fmt.Errorf("unmounting %s: %w", p, err)
			}
		}
	}
	return os.RemoveAll(dir)
}

type file struct {
	path string
	data []byte
	mode os.FileMode
}

func modeOf(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

func isTrue(b *bool) bool { return b != nil && *b }

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, def *int32, what string) ([]file, error) {
	var out []file
	if len(items) == 0 {
		for k, v := range data {
			out = append(out, file{path: k, data: v, mode: modeOf(nil, def)})
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out = append(out, file{path: it.Path, data: v, mode: modeOf(it.Mode, def)})
	}
	return out, nil
}

func configMapFiles(ctx context.Context, in podenv.Input, name string, items []corev1.KeyToPath, optional *bool, def *int32) ([]file, error) {
	cm, err := in.Sources.ConfigMap(ctx, in.Pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(optional) {
			return nil, nil
		}
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, def, "configmap "+name)
}

func secretFiles(ctx context.Context, in podenv.Input, name string, items []corev1.KeyToPath, optional *bool, def *int32) ([]file, error) {
	s, err := in.Sources.Secret(ctx, in.Pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(optional) {
			return nil, nil
		}
		return nil, fmt.Errorf("secret %q not found", name)
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return keyFiles(data, items, def, "secret "+name)
}

func downwardFiles(in podenv.Input, items []corev1.DownwardAPIVolumeFile, def *int32) ([]file, error) {
	var out []file
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podenv.FieldValue(in, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := container(in.Pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("container %q not found", it.ResourceFieldRef.ContainerName)
			}
			v, err = podenv.ResourceValue(it.ResourceFieldRef, c, in.NodeAllocatable)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, file{path: it.Path, data: []byte(v), mode: modeOf(it.Mode, def)})
	}
	return out, nil
}

func container(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name || name == "" {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// writeFiles writes files under dir, each through a temporary file and a rename so a reader never
// sees half a file.
func writeFiles(dir string, files []file) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		clean := filepath.Clean("/" + f.path)[1:]
		if clean == "" {
			return fmt.Errorf("invalid path %q", f.path)
		}
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return nil
}

// Mounts returns c's volumeMounts as runtime bind mounts (subPath resolved under the volume, made if
// missing).
func Mounts(c *corev1.Container, paths Paths) ([]runtime.Mount, error) {
	var out []runtime.Mount
	for _, m := range c.VolumeMounts {
		host, ok := paths[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no volume of that name", m.Name)
		}
		if m.SubPath != "" {
			sub := filepath.Clean("/" + m.SubPath)[1:]
			root := host
			host = filepath.Join(host, sub)
			if _, err := os.Stat(host); errors.Is(err, os.ErrNotExist) {
				if err := makeSubPath(root, host); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, runtime.Mount{HostPath: host, ContainerPath: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// makeSubPath makes a missing subPath dir under a volume's root with the root's permissions: a subPath
// of an emptyDir (0777) is as writable as the emptyDir itself is to the container's user, who is not
// the kubelet's (the process runtime runs containers as an unprivileged pod user).
func makeSubPath(root, dir string) error {
	mode := os.FileMode(0o755)
	if st, err := os.Stat(root); err == nil && st.IsDir() {
		mode = st.Mode().Perm()
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
