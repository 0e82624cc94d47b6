#!/usr/bin/env node
// kafkajs's admin client on topics and groups, for the interop scenario `admin-kafkajs`.
//
//   node admin_kafkajs.js JSON-SPEC
//
// Prints one JSON object of outcomes on stdout: each call's result, or the error's `type`
// (kafkajs names Kafka's error codes, e.g. TOPIC_ALREADY_EXISTS). kafkajs logs go to stderr.
'use strict'

const path = require('path')
const modules = process.env.INTEROP_NODE_MODULES || path.join(__dirname, '..', '..', 'target', 'interop', 'node', 'node_modules')
const { Kafka, logLevel } = require(path.join(modules, 'kafkajs'))

const spec = JSON.parse(process.argv[2])
const p = spec.prefix
const kafka = new Kafka({ clientId: 'interop-admin-kafkajs', brokers: [spec.bootstrap], logLevel: logLevel.ERROR, retry: { retries: 2 } })
const out = {}

// The outcome of a call: its value, or the error's type (or its name and message).
const outcome = async (f) => {
  try {
    const v = await f()
    return v === undefined ? 'ok' : v
  } catch (e) {
    // Retries wrap the error (cause); DeleteTopicRecords reports each partition's error.
    let inner = e
    while (inner.cause) inner = inner.cause
    inner = (inner.partitions && inner.partitions[0] && inner.partitions[0].error) || (inner.errors && inner.errors[0]) || inner
    return inner.type || `${inner.name}: ${inner.message}`
  }
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  const main = `${p}-orders`
  out.create = await outcome(() => admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: main, numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '60000' }] }]
  }))
  out.create_again = await outcome(() => admin.createTopics({ topics: [{ topic: main, numPartitions: 3 }] }))
  out.validate_only = await outcome(() => admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic: `${p}-dry`, numPartitions: 2 }] }))
  out.list_has_main = await outcome(async () => (await admin.listTopics()).includes(main))
  out.list_has_dry = await outcome(async () => (await admin.listTopics()).includes(`${p}-dry`))
  out.metadata = await outcome(async () => {
    const m = await admin.fetchTopicMetadata({ topics: [main] })
    return m.topics[0].partitions.map(x => [x.partitionId, x.leader, x.replicas]).sort()
  })
  out.cluster = await outcome(async () => {
    const c = await admin.describeCluster()
    return { clusterId: c.clusterId, controller: c.controller, brokers: c.brokers.map(b => b.nodeId) }
  })
  const { ConfigResourceTypes } = require(path.join(modules, 'kafkajs'))
  const topicConfigs = async (names) => {
    const r = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: main, configNames: names }] })
    const entries = {}
    for (const e of r.resources[0].configEntries) entries[e.configName] = [e.configValue, e.isDefault]
    return entries
  }
  out.configs = await outcome(() => topicConfigs(['retention.ms', 'cleanup.policy']))
  out.alter = await outcome(() => admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: main, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]
  }))
  // AlterConfigs replaces the whole set: retention.ms goes back to its default.
  out.configs_after_alter = await outcome(() => topicConfigs(['retention.ms', 'cleanup.policy']))
  out.alter_unknown = await outcome(() => admin.alterConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: main, configEntries: [{ name: 'no.such.config', value: '1' }] }]
  }))
  out.grow = await outcome(() => admin.createPartitions({ topicPartitions: [{ topic: main, count: 5 }] }))
  out.shrink = await outcome(() => admin.createPartitions({ topicPartitions: [{ topic: main, count: 2 }] }))

  // Records, offsets and their deletion.
  const producer = kafka.producer()
  await producer.connect()
  // Keyed: the topic is compacted now, and a compacted topic refuses records without a key.
  await producer.send({ topic: main, messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, key: `k${i}`, value: `v${i}` })) })
  await producer.disconnect()
  const offsets = async () => (await admin.fetchTopicOffsets(main)).filter(o => o.partition === 0).map(o => [o.low, o.high])[0]
  out.offsets = await outcome(offsets)
  out.delete_records = await outcome(() => admin.deleteTopicRecords({ topic: main, partitions: [{ partition: 0, offset: '4' }] }))
  out.offsets_after_delete = await outcome(offsets)
  out.delete_records_too_far = await outcome(() => admin.deleteTopicRecords({ topic: main, partitions: [{ partition: 0, offset: '99' }] }))

  // A group's committed offsets, then the group's deletion.
  const group = `${p}-group`
  out.set_offsets = await outcome(() => admin.setOffsets({ groupId: group, topic: main, partitions: [{ partition: 0, offset: '7' }] }))
  out.group_offsets = await outcome(async () => (await admin.fetchOffsets({ groupId: group, topics: [main] }))[0].partitions.filter(x => x.partition === 0).map(x => x.offset))
  out.groups_listed = await outcome(async () => (await admin.listGroups()).groups.some(g => g.groupId === group))
  out.describe_group = await outcome(async () => (await admin.describeGroups([group])).groups.map(g => [g.groupId, g.state]))
  out.delete_group = await outcome(async () => (await admin.deleteGroups([group])).map(r => [r.groupId, r.errorCode]))
  out.delete = await outcome(() => admin.deleteTopics({ topics: [main] }))
  out.list_after_delete = await outcome(async () => (await admin.listTopics()).includes(main))
  await admin.disconnect()
}

main().then(() => {
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(0)
}, (e) => {
  process.stderr.write(`admin_kafkajs failed: ${e.stack || e}\n`)
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(1)
})
