#!/usr/bin/env node
// One @confluentinc/kafka-javascript consumer of the interop suite (its KafkaJS-compatible API,
// librdkafka inside): the same event protocol as workers/pyclient.py and workers/jsclient.js.
//
//   node ckjsclient.js --role consume --spec JSON
//
// JSON events on stdout, one per line, each with "ev" and "t" (CLOCK_MONOTONIC seconds:
// process.hrtime is the same clock as Python's time.monotonic on Linux); "stop" on stdin (or end
// of input) ends it gracefully. Client logs go to stderr.
//
// spec.group_protocol "consumer" sets group.protocol=consumer (KIP-848: the broker assigns,
// incrementally); otherwise the classic protocol with spec.strategy (default "range").
//
// Generation and member id: this client exposes neither (no consumer group metadata in its
// KafkaJS API), so events carry gen null — the checker counts such records as of an ambiguous
// generation and judges this member by its holdings (held-twice), losses, order and commits.
//
// Holdings: the rebalance callback reports each assignment and revocation (rebalance_cb is
// called with the incremental change, or the whole assignment with the classic eager protocol).
// A record is committed only while the holding it was delivered under is still current: Kafka
// accepts a current member's commit of any partition (interop/README.md, "Committing correctly").
'use strict'

const path = require('path')
const modules = process.env.INTEROP_CKJS_MODULES ||
  path.join(__dirname, '..', '..', 'target', 'interop', 'node-ckjs', 'node_modules')
const { Kafka, logLevel } = require(path.join(modules, '@confluentinc', 'kafka-javascript')).KafkaJS

const { mono, emit, stop, main } = require('./events')

const tpKey = (t, p) => `${t}\u0000${p}`
const sortTps = tps => tps.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]))

// the holdings of this member, from its rebalance callbacks
const owned = new Map()    // tpKey -> [topic, partition]
const changes = new Map()  // tpKey -> how many callbacks named it
const holding = (t, p) => (owned.has(tpKey(t, p)) ? changes.get(tpKey(t, p)) || 0 : null)
const changed = tps => { for (const [t, p] of tps) changes.set(tpKey(t, p), (changes.get(tpKey(t, p)) || 0) + 1) }
const ownedList = () => sortTps([...owned.values()])

async function consume (spec) {
  const kafka = new Kafka({
    kafkaJS: {
      brokers: [spec.bootstrap],
      clientId: spec.label || 'interop',
      logLevel: process.env.INTEROP_CKJS_DEBUG ? logLevel.DEBUG : logLevel.WARN
    }
  })
  const conf = {
    'group.id': spec.group,
    'auto.offset.reset': 'earliest',
    'enable.auto.commit': false,
    rebalance_cb: (err, assignment, fns) => {
      const tps = sortTps(assignment.map(a => [a.topic, a.partition]))
      if (err.code === -175) { // ERR__ASSIGN_PARTITIONS
        for (const [t, p] of tps) owned.set(tpKey(t, p), [t, p])
        changed(tps)
        emit('assigned', { gen: null, mid: null, added: tps, owned: ownedList() })
      } else if (err.code === -174) { // ERR__REVOKE_PARTITIONS
        const lost = fns.assignmentLost()
        for (const [t, p] of tps) owned.delete(tpKey(t, p))
        changed(tps)
        emit(lost ? 'lost' : 'revoked', { gen: null, mid: null, removed: tps, owned: ownedList() })
      } else {
        emit('error', { msg: `rebalance: ${err.code} ${err.message}`, fatal: false })
      }
      // returning nothing: the client applies the assignment or revocation itself
    }
  }
  if (spec.group_protocol === 'consumer') {
    conf['group.protocol'] = 'consumer'
    if (spec.remote_assignor) conf['group.remote.assignor'] = spec.remote_assignor
  } else {
    conf['session.timeout.ms'] = spec.session_ms || 10000
    conf['heartbeat.interval.ms'] = spec.heartbeat_ms || 1000
    conf['partition.assignment.strategy'] = spec.strategy || 'range'
  }
  if (spec.instance_id) conf['group.instance.id'] = spec.instance_id
  const consumer = kafka.consumer(conf)

  emit('started', { client: 'ckjs', label: spec.label, pid: process.pid })
  await consumer.connect()
  await consumer.subscribe({ topics: spec.topics })
  const doCommit = spec.commit !== false
  await consumer.run({
    eachBatch: async ({ batch, isRunning, isStale }) => {
      if (!isRunning() || isStale() || batch.messages.length === 0) return
      const h = holding(batch.topic, batch.partition)
      const r = batch.messages.map(m => [batch.topic, batch.partition, Number(m.offset), m.key ? m.key.toString('utf8') : ''])
      emit('recs', { gen: null, gen0: null, mid: null, r })
      if (!doCommit) return
      const next = r[r.length - 1][2] + 1
      const offs = [[batch.topic, batch.partition, next]]
      if (h === null || holding(batch.topic, batch.partition) !== h) {
        emit('uncommitted', { gen: null, mid: null, offs })
        return
      }
      const t0 = mono()
      let ok = true
      let err = null
      try {
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(next) }])
      } catch (e) {
        ok = false
        err = `${e.name}: ${e.message}`
      }
      emit('commit', { gen: null, mid: null, t0, ok, err, offs })
    }
  })
  await stop.promise
  emit('closing')
  await consumer.disconnect()
  emit('closed')
}

main({ consume })
