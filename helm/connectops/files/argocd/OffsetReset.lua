-- Argo CD health for offsetresets.connectops.io (Lua 5.1, as Argo CD runs it).
-- Healthy: Succeeded (a dry run too). Degraded: Failed, with the operator's message (it names the
-- step, whether the connector was left stopped, and the backup). Progressing: Pending or Running,
-- with the current step.
local hs = { status = "Progressing", message = "Waiting for the operator" }
if obj.status == nil or obj.status.phase == nil then
  return hs
end
local succeeded = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Succeeded" then
      succeeded = condition
    end
  end
end
local said = ""
if succeeded ~= nil and succeeded.message ~= nil then
  said = succeeded.message
end
if obj.status.phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = said
elseif obj.status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = said
elseif obj.status.currentStep ~= nil then
  hs.message = obj.status.phase .. ": step " .. obj.status.currentStep
else
  hs.message = obj.status.phase
end
return hs
