package main

import (
	"go/build"
	"slices"
	"testing"

	"github.com/rayctl/rayctl/pkg/kubectli18n"
)

// rayctl itself (not only this test) imports kubectli18n, and among all the packages rayctl links it
// still initializes before any translates a message: rayctl's start does not load kubectl's catalog
// for a language kubectl does not translate.
func TestKubectlCatalogLoaderHookedFirst(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkg.Imports, "github.com/rayctl/rayctl/pkg/kubectli18n") {
		t.Fatal("rayctl does not import pkg/kubectli18n: kubectl's catalog is loaded at every start")
	}
	if !kubectli18n.Hooked {
		t.Fatal("a package translated a kubectl message before kubectli18n initialized: kubectl's catalog is loaded at every start")
	}
}
