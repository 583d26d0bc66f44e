-- Argo CD health check of graduator.io/CRDVersionPolicy (Graduator's chart,
-- charts/graduator/argocd). It reads the conditions the operator writes for
-- kstatus: Progressing while a step is under way or the policy's generation
-- is not observed yet, Degraded when the graduation waits for a person
-- (Stalled), Suspended when paused or when the next step is a change of the
-- CRD manifest in Git, Healthy when Ready.
local hs = {}
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion"
  return hs
end
if obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "spec.paused is true: the graduation waits until it is set to false"
  return hs
end
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status or {}
if status.observedGeneration == nil or status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. string.format("%d", generation)
  return hs
end
local conditions = {}
for _, c in ipairs(status.conditions or {}) do
  conditions[c.type] = c
end
local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  if stalled.reason == "AwaitingManifestChange" then
    hs.status = "Suspended"
    hs.message = stalled.message
  else
    hs.status = "Degraded"
    hs.message = stalled.reason .. ": " .. stalled.message
  end
  return hs
end
local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = reconciling.reason .. ": " .. reconciling.message
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for the operator"
return hs
