package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// SystemNamespaces exist from the first start, as on a real cluster.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces and installs the CRDs, waiting until each is Established.
// It runs as a post-start hook, so /readyz fails until it is done.
func bootstrap(ctx context.Context, cfg *rest.Config, crds [][]byte) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range SystemNamespaces {
		err := retry(ctx, func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return InstallCRDs(ctx, cfg, crds)
}

// InstallCRDs creates or updates each CRD manifest and waits until all are Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, manifests [][]byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	var names []string
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(m, crd); err != nil {
			return fmt.Errorf("reading a CRD manifest: %w", err)
		}
		names = append(names, crd.Name)
		err := retry(ctx, func() error {
			existing, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			crd.ResourceVersion = existing.ResourceVersion
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s did not become Established: %w", name, err)
		}
	}
	return nil
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
		case apierrors.IsServiceUnavailable(last), apierrors.IsTooManyRequests(last), apierrors.IsServerTimeout(last),
			apierrors.IsConflict(last), apierrors.IsInternalError(last):
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
