-- Argo CD health for connectclusters.connectops.io (Lua 5.1, as Argo CD runs it).
-- Healthy: Ready=True (the workers answered as Kafka Connect). Degraded: Ready=False (unreachable,
-- not Kafka Connect, URL not allowed, a missing Secret). Progressing: not yet observed, or the
-- worker says it is starting (Ready=False WorkerStarting, KIP-1017).
local hs = { status = "Progressing", message = "Waiting for the operator" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation) then
  hs.message = "Waiting for the operator to act on generation " .. obj.metadata.generation
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    hs.message = condition.message or condition.reason or ""
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.status == "False" and condition.reason == "WorkerStarting" then
      hs.status = "Progressing"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    end
  end
end
return hs
