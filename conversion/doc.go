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

// Package conversion holds the sample Pizza API in three versions, v1alpha1,
// v1beta1 and v1 (the hub), and the hub-and-spoke conversions between them.
// Between the versions: spec.sauce is renamed spec.base; spec.toppings, a
// list of strings, becomes a list of structs; crust, delivery and the grams
// of a topping exist only in newer versions and survive a round trip through
// an older one in the annotation restaurant.example.com/conversion-data.
// With the versions under it, it is the sample to read and copy, and the
// demo's and the suites' fixture: importable, not a library, free to change.
package conversion

// dataAnnotation holds, on an object read at an older version, the
// fields that version cannot represent, as JSON, so that writing the object
// back through the older version loses nothing.
const dataAnnotation = "restaurant.example.com/conversion-data"
