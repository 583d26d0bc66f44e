/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package sample runs the project's sample Pizza API beside a control plane:
// its CRD stages (config/samples/pizza), its conversion webhook served in
// this process (stoppable, to stage an outage), sample objects, and the way
// a GitOps tool configured for Graduator's managed mode applies a CRD
// manifest. `make demo` uses it, and the suites through test/pizzaenv and
// test/gitops.
package sample

import (
	"fmt"
	"io/fs"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	pizzasamples "github.com/graduator/graduator/config/samples/pizza"
	v1 "github.com/graduator/graduator/conversion/v1"
	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/conversion/v1beta1"
)

// CRDName is the sample CRD's name.
const CRDName = "pizzas.restaurant.example.com"

// AddToScheme registers every version of the Pizza API.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta1.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Resource is the Pizza resource at a version.
func Resource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "restaurant.example.com", Version: version, Resource: "pizzas"}
}

// Stage returns the committed CRD manifest of stage n (1 to 6).
func Stage(n int) (*apiextensionsv1.CustomResourceDefinition, error) {
	matches, err := fs.Glob(pizzasamples.Stages, strconv.Itoa(n)+"-*.yaml")
	if err != nil || len(matches) != 1 {
		return nil, fmt.Errorf("no Pizza CRD stage %d in config/samples/pizza", n)
	}
	data, err := pizzasamples.Stages.ReadFile(matches[0])
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("decode %s: %w", matches[0], err)
	}
	return &crd, nil
}

var (
	sauces   = []string{"tomato", "cream", "pesto"}
	sizes    = []string{"small", "medium", "large"}
	toppings = [][]string{{"mozzarella", "basil"}, {"ham", "pineapple"}, {"mushrooms"}, nil, {"olives", "anchovies", "capers"}}
)

// SampleV1alpha1 returns the i-th sample Pizza, at v1alpha1, in namespace
// default.
func SampleV1alpha1(i int) *v1alpha1.Pizza {
	return &v1alpha1.Pizza{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pizza-%05d", i), Namespace: "default",
			Labels: map[string]string{"restaurant.example.com/table": strconv.Itoa(i % 12)}},
		Spec: v1alpha1.PizzaSpec{Sauce: sauces[i%len(sauces)], Size: sizes[i%len(sizes)], Toppings: toppings[i%len(toppings)]},
	}
}
