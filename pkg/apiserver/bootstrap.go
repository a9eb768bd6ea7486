package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac/policy"
)

// SystemNamespaces exist from the first start, as on a real cluster.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces, installs the CRDs, waiting until each is Established, and
// applies the RBAC policy, waiting until authz has it in force. It runs as a post-start hook, so /readyz
// fails until it is done.
func bootstrap(ctx context.Context, cfg *rest.Config, crds [][]byte, rbacPolicy []runtime.Object, authz *rbac.Authorizer) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	errs := make([]error, len(SystemNamespaces)+2)
	var wg, namespaces sync.WaitGroup
	for i, name := range SystemNamespaces {
		namespaces.Go(func() {
			errs[i] = retry(ctx, func() error {
				_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("creating namespace %s: %w", name, errs[i])
			}
		})
	}
	wg.Go(func() { errs[len(SystemNamespaces)] = InstallCRDs(ctx, cfg, crds) })
	// The policy holds Roles in system namespaces, so it follows them.
	namespaces.Wait()
	errs[len(SystemNamespaces)+1] = applyRBAC(ctx, client, rbacPolicy, authz)
	wg.Wait()
	return errors.Join(errs...)
}

// applyRBAC creates or updates the policy's roles and bindings and waits until authz enforces them.
func applyRBAC(ctx context.Context, client kubernetes.Interface, objs []runtime.Object, authz *rbac.Authorizer) error {
	var stored []runtime.Object
	err := retry(ctx, func() error {
		var err error
		stored, err = policy.Apply(ctx, client, objs)
		return err
	})
	if err != nil {
		return fmt.Errorf("applying the RBAC policy: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := authz.WaitFor(waitCtx, stored...); err != nil {
		return fmt.Errorf("RBAC policy not in force: %w", err)
	}
	klog.InfoS("RBAC policy applied", "objects", len(stored))
	return nil
}

// InstallCRDs creates or updates each CRD manifest and waits until all are Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, manifests [][]byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	names := make([]string, len(manifests))
	errs := make([]error, len(manifests))
	ready := make([]bool, len(manifests))
	var wg sync.WaitGroup
	for i, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(m, crd); err != nil {
			return fmt.Errorf("reading a CRD manifest: %w", err)
		}
		sum := sha256.Sum256(m)
		if crd.Annotations == nil {
			crd.Annotations = map[string]string{}
		}
		crd.Annotations[ManifestHashAnnotation] = hex.EncodeToString(sum[:])
		names[i] = crd.Name
		wg.Add(1)
		// Validating a large CRD costs CPU; the three are written side by side.
		go func() {
			defer wg.Done()
			errs[i] = retry(ctx, func() error {
				var err error
				ready[i], err = applyCRD(ctx, crds, crd)
				return err
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("installing CRD %s: %w", crd.Name, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	klog.InfoS("CRDs written", "count", len(names))
	pending := map[string]bool{}
	for i, name := range names {
		if !ready[i] {
			pending[name] = true
		}
	}
	if err := waitEstablished(ctx, crds, pending, time.Minute); err != nil {
		return err
	}
	klog.InfoS("CRDs established", "count", len(names))
	return nil
}

// waitEstablished watches CRDs until every one named in pending is Established. A watch rather than a
// poll: each read of a Ray CRD decodes and encodes half a megabyte, which a poll every few milliseconds
// would spend the start-up's CPU on while the server establishes them. (No precondition: the initial
// list arrives as events, and a precondition would wait for it by polling.)
func waitEstablished(ctx context.Context, crds apiextensionsv1client.CustomResourceDefinitionInterface, pending map[string]bool, timeout time.Duration) error {
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return crds.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return crds.Watch(ctx, opts)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextensionsv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		if crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition); ok && established(crd) {
			delete(pending, crd.Name)
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		names := make([]string, 0, len(pending))
		for name := range pending {
			names = append(names, name)
		}
		sort.Strings(names)
		return fmt.Errorf("CRDs %v did not become Established within %s: %w", names, timeout, err)
	}
	return nil
}

// ManifestHashAnnotation records the hash of the manifest a CRD was installed from, so a restart with
// the same manifests writes nothing.
const ManifestHashAnnotation = "rayctl.io/manifest-sha256"

// applyCRD creates crd, or updates it when the stored one came from another manifest.
// It reports whether the CRD is already Established (so there is nothing to wait for).
func applyCRD(ctx context.Context, crds apiextensionsv1client.CustomResourceDefinitionInterface, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	existing, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
		return false, err
	}
	if err != nil {
		return false, err
	}
	if existing.Annotations[ManifestHashAnnotation] == crd.Annotations[ManifestHashAnnotation] {
		return established(existing), nil
	}
	update := crd.DeepCopy()
	update.ResourceVersion = existing.ResourceVersion
	_, err = crds.Update(ctx, update, metav1.UpdateOptions{})
	return false, err
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// retry runs f until it succeeds, ends with an error that is not worth retrying, or ctx ends. The server's
// own endpoints may answer 503 or 429 for a moment while it starts.
func retry(ctx context.Context, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = f()
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			klog.V(2).InfoS("retrying during start-up", "err", last)
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// retriable reports whether err is worth retrying while the server starts.
func retriable(err error) bool {
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsConflict(err) || apierrors.IsInternalError(err)
}
