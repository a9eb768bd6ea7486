package serviceaccount_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/kube/serviceaccount"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, "controller", func(i *framework.Instance) (func(context.Context) error, error) {
		in = i
		return func(ctx context.Context) error { return serviceaccount.Run(ctx, in.Config) }, nil
	})
}

func TestDefaultServiceAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := in.Client
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sa-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var first *corev1.ServiceAccount
	framework.WaitFor(t, ctx, "the default ServiceAccount of a new namespace", func() (bool, error) {
		first, err = c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, framework.IgnoreNotFound(err)
	})

	if err := c.CoreV1().ServiceAccounts(ns.Name).Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, ctx, "the default ServiceAccount to come back after deletion", func() (bool, error) {
		sa, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.UID != first.UID, framework.IgnoreNotFound(err)
	})

	// Other ServiceAccounts are left alone.
	if _, err := c.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().ServiceAccounts(ns.Name).Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount mine after deletion: got %v, want NotFound", err)
	}
}

func TestSystemNamespacesHaveOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		framework.WaitFor(t, ctx, "the default ServiceAccount of "+ns, func() (bool, error) {
			_, err := in.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, framework.IgnoreNotFound(err)
		})
	}
}
