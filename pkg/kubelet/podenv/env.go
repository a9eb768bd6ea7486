package podenv

import (
	"context"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// Sources fetches the objects a container's environment may refer to. The config maps and secrets it
// returns may be shared with other readers (a cache's own objects): read them, never change them.
type Sources interface {
	// ConfigMap returns the config map ns/name (an error satisfying apierrors.IsNotFound when absent).
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	// Secret returns the secret ns/name (an error satisfying apierrors.IsNotFound when absent).
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	// ServiceAccountToken asks for a token of the service account ns/name (TokenRequest).
	ServiceAccountToken(ctx context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// PersistentVolumeClaim returns the claim ns/name (an error satisfying apierrors.IsNotFound when absent).
	PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error)
	// PersistentVolume returns the volume name (an error satisfying apierrors.IsNotFound when absent).
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// APIServer is where containers reach the API server (the kubernetes Service's endpoint).
type APIServer struct {
	Host string
	Port int
}

// Input is what resolving a container's environment needs besides the container itself.
type Input struct {
	// Pod is the pod, with status.podIP and status.hostIP as they will be reported.
	Pod *corev1.Pod
	// PodIP and HostIP override the pod's status fields (the kubelet knows them before it reports them).
	PodIP, HostIP string
	// NodeAllocatable stands in for limits a container does not set (resourceFieldRef).
	NodeAllocatable corev1.ResourceList
	// Sources looks up config maps and secrets.
	Sources Sources
	// APIServer, when set, gives every container KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and
	// the rest of the kubernetes Service's variables, as every pod on a cluster has.
	APIServer *APIServer
}

// Environment resolves c's environment in Kubernetes order: the kubernetes Service's variables first
// (in.APIServer), then envFrom sources, then env entries,
// each env value expanding $(VAR) references to variables defined before it. A later definition of a
// name replaces the earlier value and keeps its position. Missing non-optional config maps, secrets or
// keys are errors (the kubelet reports them as CreateContainerConfigError).
func Environment(ctx context.Context, in Input, c *corev1.Container) ([]runtime.EnvVar, error) {
	var order []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			order = append(order, name)
		}
		values[name] = value
	}
	if a := in.APIServer; a != nil {
		for _, kv := range APIServerVariables(a.Host, a.Port) {
			set(kv[0], kv[1])
		}
	}
	ns := in.Pod.Namespace
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := in.Sources.ConfigMap(ctx, ns, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("configmap %q not found", from.ConfigMapRef.Name)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := in.Sources.Secret(ctx, ns, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("secret %q not found", from.SecretRef.Name)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
			for k, v := range s.StringData {
				data[k] = v
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if len(validation.IsEnvVarName(name)) > 0 {
				continue
			}
			set(name, data[k])
		}
	}
	lookup := func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, Expand(e.Value, lookup))
			continue
		}
		v, skip, err := valueFrom(ctx, in, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]runtime.EnvVar, len(order))
	for i, name := range order {
		out[i] = runtime.EnvVar{Name: name, Value: values[name]}
	}
	return out, nil
}

// APIServerVariables are the variables of the kubernetes Service in a container's environment, as the
// kubelet sets them from the Service (here from its endpoint, which pods reach): KUBERNETES_SERVICE_HOST,
// KUBERNETES_SERVICE_PORT, KUBERNETES_SERVICE_PORT_HTTPS and the Docker-link style KUBERNETES_PORT family.
func APIServerVariables(host string, port int) [][2]string {
	p := strconv.Itoa(port)
	url := "tcp://" + net.JoinHostPort(host, p)
	prefix := "KUBERNETES_PORT_" + p + "_TCP"
	return [][2]string{
		{"KUBERNETES_SERVICE_HOST", host},
		{"KUBERNETES_SERVICE_PORT", p},
		{"KUBERNETES_SERVICE_PORT_HTTPS", p},
		{"KUBERNETES_PORT", url},
		{prefix, url},
		{prefix + "_PROTO", "tcp"},
		{prefix + "_PORT", p},
		{prefix + "_ADDR", host},
	}
}

// Lookup returns a lookup function over env, for Expand.
func Lookup(env []runtime.EnvVar) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func valueFrom(ctx context.Context, in Input, c *corev1.Container, src *corev1.EnvVarSource) (value string, skip bool, err error) {
	ns := in.Pod.Namespace
	switch {
	case src.FieldRef != nil:
		v, err := FieldValue(in, src.FieldRef.FieldPath)
		return v, false, err
	case src.ResourceFieldRef != nil:
		target := c
		if name := src.ResourceFieldRef.ContainerName; name != "" && name != c.Name {
			target = findContainer(in.Pod, name)
			if target == nil {
				return "", false, fmt.Errorf("container %q not found", name)
			}
		}
		v, err := ResourceValue(src.ResourceFieldRef, target, in.NodeAllocatable)
		return v, false, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := in.Sources.ConfigMap(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("configmap %q not found", ref.Name)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, false, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), false, nil
		}
		if isTrue(ref.Optional) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, ns, ref.Name)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := in.Sources.Secret(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("secret %q not found", ref.Name)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), false, nil
		}
		if v, ok := s.StringData[ref.Key]; ok {
			return v, false, nil
		}
		if isTrue(ref.Optional) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// FieldValue returns the downward API value of a pod field path such as metadata.name,
// metadata.labels['app'] or status.podIP. The map paths metadata.labels and metadata.annotations
// (volumes only) give one key="value" line per entry, sorted.
func FieldValue(in Input, path string) (string, error) {
	pod := in.Pod
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	podIP, hostIP := in.PodIP, in.HostIP
	if podIP == "" {
		podIP = pod.Status.PodIP
	}
	if hostIP == "" {
		hostIP = pod.Status.HostIP
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return podIP, nil
	case "status.hostIP":
		return hostIP, nil
	case "status.hostIPs":
		return hostIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// subscript parses prefix['key'] (or prefix["key"]).
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", false
	}
	rest = rest[:len(rest)-1]
	q := rest[0]
	if (q != '\'' && q != '"') || rest[len(rest)-1] != q {
		return "", false
	}
	return rest[1 : len(rest)-1], true
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// ResourceValue returns a container's resource field (limits.cpu, requests.memory, …) divided by the
// divisor and rounded up, as the downward API shows it. Unset limits fall back to the node's allocatable.
func ResourceValue(ref *corev1.ResourceFieldSelector, c *corev1.Container, allocatable corev1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	rn := corev1.ResourceName(name)
	var q resource.Quantity
	var found bool
	if kind == "limits" {
		q, found = c.Resources.Limits[rn]
		if !found {
			q, found = allocatable[rn]
		}
	} else {
		q, found = c.Resources.Requests[rn]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch rn {
	case corev1.ResourceCPU:
		if !found {
			return "0", nil
		}
		v := int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
		return fmt.Sprint(v), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		if !found {
			return "0", nil
		}
		v := int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("unsupported resource %q", ref.Resource)
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }
