package rootca_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/rootca"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

// testCA stands for the cluster CA: the controller publishes what it is given.
const testCA = "-----BEGIN CERTIFICATE-----\nrayctl test\n-----END CERTIFICATE-----\n"

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, "controller", func(i *framework.Instance) (func(context.Context) error, error) {
		in = i
		return func(ctx context.Context) error {
			return ctrlset.RunStandalone(ctx, in.Config, rootca.Setup, ctrlset.Env{Name: rootca.Name, RootCA: []byte(testCA)})
		}, nil
	})
}

func TestEveryNamespaceGetsTheCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := in.Client
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rootca-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := c.CoreV1().ConfigMaps(ns.Name)
	published := func(what string, cond func(*corev1.ConfigMap) bool) *corev1.ConfigMap {
		var cm *corev1.ConfigMap
		framework.WaitFor(t, ctx, what, func() (bool, error) {
			cm, err = cms.Get(ctx, rootca.ConfigMapName, metav1.GetOptions{})
			return err == nil && len(cm.Data) == 1 && cm.Data[rootca.DataKey] == testCA && cond(cm), framework.IgnoreNotFound(err)
		})
		return cm
	}
	first := published("kube-root-ca.crt in a new namespace", func(*corev1.ConfigMap) bool { return true })

	first.Data = map[string]string{rootca.DataKey: "tampered", "extra": "x"}
	if _, err := cms.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	published("kube-root-ca.crt put back after a change", func(cm *corev1.ConfigMap) bool { return cm.UID == first.UID })

	if err := cms.Delete(ctx, rootca.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	published("kube-root-ca.crt made anew after deletion", func(cm *corev1.ConfigMap) bool { return cm.UID != first.UID })

	for _, sys := range []string{"default", "kube-system", "kube-public"} {
		framework.WaitFor(t, ctx, "kube-root-ca.crt in "+sys, func() (bool, error) {
			_, err := c.CoreV1().ConfigMaps(sys).Get(ctx, rootca.ConfigMapName, metav1.GetOptions{})
			return err == nil, framework.IgnoreNotFound(err)
		})
	}
}
