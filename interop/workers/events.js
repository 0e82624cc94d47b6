// What the Node.js workers of the interop suite share: JSON events on stdout, one per line,
// each with "ev" and "t" (CLOCK_MONOTONIC seconds: process.hrtime is the same clock as
// Python's time.monotonic on Linux), and "stop" on stdin (or end of input) to end gracefully.
'use strict'

const mono = () => Number(process.hrtime.bigint()) / 1e9
const emit = (ev, obj = {}) => {
  process.stdout.write(JSON.stringify({ ...obj, ev, t: mono() }) + '\n')
}

// stop.requested turns true, and stop.promise resolves, once "stop" arrives or stdin ends
const stop = { requested: false }
stop.promise = new Promise(resolve => {
  let buf = ''
  const request = () => {
    if (!stop.requested) {
      stop.requested = true
      resolve()
    }
  }
  process.stdin.on('data', d => {
    buf += d.toString()
    if (buf.split('\n').some(l => l.trim() === 'stop')) request()
  })
  process.stdin.on('end', request)
})

// main({ role: async spec => ... }): runs `--role R --spec JSON` from the command line; a
// failure is reported as a fatal "error" event (stack on stderr) and exits 1. The process exits
// when the role returns: the clients' sockets and timers would keep it alive.
async function main (roles) {
  const args = process.argv.slice(2)
  const role = args[args.indexOf('--role') + 1]
  try {
    const spec = JSON.parse(args[args.indexOf('--spec') + 1])
    if (!Object.hasOwn(roles, role)) throw new Error(`unknown role ${role} (this worker has ${Object.keys(roles).join(', ')})`)
    await roles[role](spec)
    process.exit(0)
  } catch (e) {
    emit('error', { msg: `${e.name}: ${e.message}`, fatal: true })
    process.stderr.write(`${e.stack}\n`)
    process.exit(1)
  }
}

module.exports = { mono, emit, stop, main }
