#!/usr/bin/env node
// One kafkajs client process of the interop suite: the same protocol as workers/pyclient.py.
//
//   node jsclient.js --role consume|produce --spec JSON
//
// JSON events on stdout, one per line, each with "ev" and "t" (CLOCK_MONOTONIC seconds:
// process.hrtime is the same clock as Python's time.monotonic on Linux); "stop" on stdin (or end
// of input) ends it gracefully. kafkajs logs go to stderr.
//
// Generation: kafkajs exposes no generation id. ConsumerGroup.prototype.joinAndSync is wrapped
// so the live ConsumerGroup object is known, and its generationId (set from the JoinGroup
// response) is read when a batch is handed to eachBatch and when GROUP_JOIN fires.
'use strict'

const path = require('path')
const modules = process.env.INTEROP_NODE_MODULES || path.join(__dirname, '..', '..', 'target', 'interop', 'node', 'node_modules')
const { Kafka, logLevel, Partitioners, CompressionTypes } = require(path.join(modules, 'kafkajs'))
const ConsumerGroup = require(path.join(modules, 'kafkajs', 'src', 'consumer', 'consumerGroup'))

const { mono, emit, stop, main } = require('./events')

let liveGroup = null
const origJoinAndSync = ConsumerGroup.prototype.joinAndSync
ConsumerGroup.prototype.joinAndSync = function (...args) {
  liveGroup = this
  return origJoinAndSync.apply(this, args)
}
const gen = () => (liveGroup && liveGroup.generationId != null ? liveGroup.generationId : null)
const mid = () => (liveGroup ? liveGroup.memberId : null)

// ---- records: the formulas of interop/lib/records.py
const key = (prefix, i) => `${prefix}-${String(i).padStart(6, '0')}`
const value = (prefix, i) => Buffer.from(`value-${prefix}-${i}-` + 'x'.repeat(i % 37))
const headers = i => ({ seq: Buffer.from(String(i)), bin: Buffer.from([i % 256, 0, 255 - (i % 256)]) })
const timestamp = (tsBase, i) => tsBase + i

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

function client (spec) {
  const [host, port] = [spec.bootstrap.slice(0, spec.bootstrap.lastIndexOf(':')), spec.bootstrap.slice(spec.bootstrap.lastIndexOf(':') + 1)]
  return new Kafka({
    clientId: spec.label || 'interop',
    brokers: [`${host}:${port}`],
    logLevel: process.env.INTEROP_KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 100 }
  })
}

async function consume (spec) {
  const kafka = client(spec)
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: spec.session_ms || 10000,
    heartbeatInterval: spec.heartbeat_ms || 1000,
    rebalanceTimeout: spec.rebalance_ms || 30000,
    maxWaitTimeInMs: 200
  })
  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
  let owned = []
  consumer.on(GROUP_JOIN, e => {
    const added = []
    for (const [topic, parts] of Object.entries(e.payload.memberAssignment || {})) {
      for (const p of parts) added.push([topic, p])
    }
    added.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]))
    owned = added
    emit('generation', { gen: gen(), mid: e.payload.memberId })
    emit('assigned', { gen: gen(), mid: e.payload.memberId, added, owned, leader: e.payload.isLeader, proto: e.payload.groupProtocol })
  })
  consumer.on(REBALANCING, e => {
    const removed = owned
    owned = []
    emit('revoked', { gen: gen(), mid: e.payload.memberId, removed, owned })
  })
  consumer.on(CRASH, e => emit('error', { msg: `crash: ${e.payload.error}`, fatal: !e.payload.restart }))

  emit('started', { client: 'kafkajs', label: spec.label, pid: process.pid })
  await consumer.connect()
  await consumer.subscribe({ topics: spec.topics, fromBeginning: true })
  const full = !!spec.full
  const doCommit = spec.commit !== false
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      if (!isRunning() || isStale() || batch.messages.length === 0) return
      const g = gen()
      const m = mid()
      const r = []
      const f = []
      for (const msg of batch.messages) {
        const o = Number(msg.offset)
        r.push([batch.topic, batch.partition, o, msg.key ? msg.key.toString('utf8') : ''])
        if (full) {
          const hs = []
          for (const [hk, hv] of Object.entries(msg.headers || {})) {
            for (const v of Array.isArray(hv) ? hv : [hv]) hs.push([hk, v == null ? null : Buffer.from(v).toString('hex')])
          }
          f.push([batch.topic, batch.partition, o, msg.key ? msg.key.toString('hex') : null,
            msg.value ? msg.value.toString('hex') : null, hs, Number(msg.timestamp), null])
        }
        resolveOffset(msg.offset)
      }
      const ev = { gen: g, gen0: g, mid: m, r }
      if (full) ev.f = f
      emit('recs', ev)
      // Commit only while the batch's partition is still held in the batch's generation: Kafka
      // accepts a current member's commit of any partition (see "Committing correctly" in
      // interop/README.md). kafkajs does not rejoin while eachBatch runs (the runner rejoins
      // after the fetcher's batches are processed), so this is not expected to skip anything.
      const held = gen() === g && owned.some(([t, p]) => t === batch.topic && p === batch.partition)
      const last = Number(batch.messages[batch.messages.length - 1].offset)
      if (doCommit && !held) {
        emit('uncommitted', { gen: g, mid: m, offs: [[batch.topic, batch.partition, last + 1]] })
      } else if (doCommit) {
        const t0 = mono()
        let ok = true
        let err = null
        try {
          await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(last + 1) }])
        } catch (e) {
          ok = false
          err = `${e.name}: ${e.message}`
        }
        emit('commit', { gen: g, mid: m, t0, ok, err, offs: [[batch.topic, batch.partition, last + 1]] })
      }
    }
  })
  await stop.promise
  emit('closing')
  await consumer.disconnect()
  emit('closed')
}

async function produce (spec) {
  const kafka = client(spec)
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false })
  emit('started', { client: 'kafkajs', label: spec.label, pid: process.pid })
  await producer.connect()
  const start = spec.start || 0
  const count = spec.count
  const rate = spec.rate || 0
  const tsBase = spec.ts_base || 1700000000000
  const compression = { gzip: CompressionTypes.GZIP }[spec.compression] || CompressionTypes.None
  const chunk = 50
  const t0 = mono()
  for (let n = 0; n < count && !stop.requested; n += chunk) {
    if (rate) {
      const delay = t0 + n / rate - mono()
      if (delay > 0) await new Promise(resolve => setTimeout(resolve, delay * 1000))
    }
    const byTopic = {}
    for (let i = start + n; i < start + Math.min(n + chunk, count); i++) {
      const topic = spec.topics[i % spec.topics.length]
      ;(byTopic[topic] = byTopic[topic] || []).push({ key: key(spec.prefix, i), value: value(spec.prefix, i), headers: headers(i), timestamp: String(timestamp(tsBase, i)) })
    }
    const acked = []
    for (const [topic, messages] of Object.entries(byTopic)) {
      await producer.send({ topic, messages, acks: -1, compression })
      // kafkajs reports one base offset per partition, not which message went where
      for (const m of messages) acked.push([topic, m.key, null, null])
    }
    emit('produced', { r: acked })
  }
  await producer.disconnect()
  emit('done', { n: count })
}

main({ consume, produce })
