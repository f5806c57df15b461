"""MirrorMaker 2's offset-syncs topic around a reset: who else uses it, and its cleanup.

The topic (``mm2-offset-syncs.<alias>.internal``) is shared by every flow between the same two
clusters. Only MirrorCheckpointTask reads it (to translate group offsets); MirrorSourceTask
replicates from its Connect offsets alone, so a reset replicates again whether the syncs are kept
or not. Kept, the checkpoint task may translate with syncs from before the reset until the
restarted source writes new ones (a new sync below the last one clears its store); deleted, the
offset translation of every flow that writes it restarts. The topic MM2 creates is compacted:
``truncate`` (DeleteRecords) works on it because the adapter lends it the ``delete`` policy for
the call. So the inspect step lists the other
MirrorSourceConnectors on the worker that use it (the plan refuses ``auto`` when there are any),
and the offsetSyncs step applies what the plan resolved.
"""

from __future__ import annotations

import asyncio

from connectops.models.offset_reset import OffsetsTopicLocation, OffsetSyncsCleanup
from connectops.planning.offset_reset import MirrorFlow, offset_syncs_topic, shares_syncs_topic
from connectops.reconcilers.reset_run import KafkaApi, Run, StepFailed


async def other_flows(run: Run, managed_by: dict[str, str]) -> list[MirrorFlow]:
    """MirrorSourceConnectors on the worker, outside this reset, that use the offset-syncs topic
    it would clean up. Class names are matched loosely ("MirrorSource" in the simple name, so
    forks and wrappers count): a false match only asks the user to choose explicitly."""
    mm2 = run.spec.mirror_maker2
    if mm2 is None or OffsetSyncsCleanup(mm2.offset_syncs) in (OffsetSyncsCleanup.KEEP, OffsetSyncsCleanup.NONE):
        return []
    location = OffsetsTopicLocation(mm2.offset_syncs_topic_location)
    topic = offset_syncs_topic(
        mm2.source_alias, mm2.target_alias, location, mm2.separator, mm2.internal_topic_separator_enabled
    )
    access = mm2.source_cluster if location is OffsetsTopicLocation.SOURCE else mm2.target_cluster
    kafka = access or run.cluster.spec.kafka
    bootstrap = kafka.bootstrap_servers if kafka is not None else ""
    ours = set(run.connectors)
    flows = []
    for name in await run.cluster.client.list_connectors():
        if name in ours:
            continue
        info = await run.cluster.client.get_connector(name)
        if info is None:
            continue
        config = {str(k): str(v) for k, v in (info.get("config") or {}).items()}
        if "MirrorSource" not in config.get("connector.class", "").rsplit(".", 1)[-1]:
            continue
        if shares_syncs_topic(config, topic, bootstrap):
            flows.append(MirrorFlow(name, managed_by.get(name)))
    return flows


async def clean_offset_syncs(run: Run) -> str:
    """Delete or truncate the topic, as the plan resolved it (``auto`` became ``delete`` there)."""
    mm2 = run.spec.mirror_maker2
    assert mm2 is not None
    plan = run.plan
    topic = plan.offset_syncs_topic
    if not topic:
        raise StepFailed("the plan names no offset-syncs topic to clean up")
    location = OffsetsTopicLocation(plan.offset_syncs_cluster or OffsetsTopicLocation.TARGET)
    access = mm2.source_cluster if location is OffsetsTopicLocation.SOURCE else mm2.target_cluster
    kafka: KafkaApi
    if access is not None:
        # config with configFrom's Secret values, read before the reset changed anything
        kafka = run.kafka_factory(access.bootstrap_servers, run.mirror_kafka_config[str(location)])
    elif run.kafka is not None:
        kafka = run.kafka
    else:
        raise StepFailed(f"no Kafka access for the {plan.offset_syncs_cluster} cluster holding {topic}")
    cleanup = OffsetSyncsCleanup(plan.offset_syncs_cleanup or OffsetSyncsCleanup.NONE)
    if cleanup not in (OffsetSyncsCleanup.DELETE, OffsetSyncsCleanup.TRUNCATE):
        raise StepFailed(f"the plan resolved no cleanup of {topic} ({cleanup}); nothing was changed")
    if cleanup is OffsetSyncsCleanup.DELETE:
        await asyncio.to_thread(kafka.delete_topic, topic)
        return f"deleted offset-syncs topic {topic}"
    await asyncio.to_thread(kafka.truncate_topic, topic)
    return f"truncated offset-syncs topic {topic}"
