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

// Package pizzasamples embeds the sample Pizza CRD at each stage of its
// graduation, so tests and the demo apply exactly the committed manifests.
// A sample to read and copy, not a library: it may change in any release.
package pizzasamples

import "embed"

// Stages holds the files 1-v1alpha1.yaml ... 6-drop-v1alpha1.yaml.
//
//go:embed [1-6]-*.yaml
var Stages embed.FS
