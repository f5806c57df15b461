-- Argo CD health for connectors.connectops.io (Lua 5.1, as Argo CD runs it).
-- Healthy: Ready=True and running. Suspended: paused or stopped on purpose, or reconciliation
-- paused by annotation. Progressing: not yet observed, or on its way (not created yet, state
-- changing, no task started or one not RUNNING yet, an offset reset holding it, spec.offsets being applied). Degraded: anything else Ready=False
-- says (invalid config, plugin not installed, failed tasks, name conflict, Connect unreachable).
local hs = { status = "Progressing", message = "Waiting for the operator" }
local annotations = obj.metadata.annotations
if annotations ~= nil and annotations["connectops.io/reconcile"] == "paused" then
  hs.status = "Suspended"
  hs.message = "Reconciliation paused (annotation connectops.io/reconcile: paused)"
  return hs
end
if obj.status == nil then
  return hs
end
if obj.metadata.generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation) then
  hs.message = "Waiting for the operator to act on generation " .. obj.metadata.generation
  return hs
end
local ready = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    end
  end
end
if ready == nil then
  return hs
end
hs.message = ready.message or ready.reason or ""
if ready.status == "True" then
  if ready.reason == "Paused" or ready.reason == "Stopped" then
    hs.status = "Suspended"
  else
    hs.status = "Healthy"
  end
  return hs
end
local progressing = { NotCreated = true, StateMismatch = true, NoTasks = true, TasksNotRunning = true, OffsetResetInProgress = true, WorkerStarting = true, ApplyingOffsets = true }
if ready.status == "False" and not progressing[ready.reason] then
  hs.status = "Degraded"
end
return hs
