#!/usr/bin/env node
// The glibc floor of a Linux binary: the symbol versions it needs from glibc, read from its
// ELF version-needed section (.gnu.version_r), with no binutils needed.
//
//   node scripts/check-glibc.js [--max 2.17] FILE.node ...
//
// Prints `FILE: needs GLIBC_x.y (from libc.so.6, ...)` for each file and exits 1 when a file
// needs a GLIBC_ version newer than --max (default 2.17, the floor the Linux glibc packages
// promise), or is not an ELF file with a version-needed section.
'use strict'
const fs = require('node:fs')

const SHT_GNU_VERNEED = 0x6ffffffe

/** `{ file, version }` for every version a shared library must provide to load `buf`. */
function versionsNeeded(buf) {
  if (buf.readUInt32BE(0) !== 0x7f454c46) throw new Error('not an ELF file')
  const is64 = buf[4] === 2
  const le = buf[5] === 1
  const u16 = (o) => (le ? buf.readUInt16LE(o) : buf.readUInt16BE(o))
  const u32 = (o) => (le ? buf.readUInt32LE(o) : buf.readUInt32BE(o))
  const addr = (o) => (is64 ? Number(le ? buf.readBigUInt64LE(o) : buf.readBigUInt64BE(o)) : u32(o))
  const shoff = addr(is64 ? 0x28 : 0x20)
  const shentsize = u16(is64 ? 0x3a : 0x2e)
  const shnum = u16(is64 ? 0x3c : 0x30)
  const section = (i) => {
    const at = shoff + i * shentsize
    return {
      type: u32(at + 4),
      offset: addr(at + (is64 ? 0x18 : 0x10)),
      link: u32(at + (is64 ? 0x28 : 0x18)),
      info: u32(at + (is64 ? 0x2c : 0x1c)),
    }
  }
  const sections = Array.from({ length: shnum }, (_, i) => section(i))
  const verneed = sections.find((s) => s.type === SHT_GNU_VERNEED)
  if (!verneed) throw new Error('no version-needed section')
  const strtab = sections[verneed.link].offset
  const str = (o) => {
    const start = strtab + o
    return buf.toString('latin1', start, buf.indexOf(0, start))
  }
  const needed = []
  // Elf_Verneed: vn_version u16, vn_cnt u16, vn_file u32, vn_aux u32, vn_next u32;
  // Elf_Vernaux: vna_hash u32, vna_flags u16, vna_other u16, vna_name u32, vna_next u32.
  let entry = verneed.offset
  for (let i = 0; i < verneed.info; i++) {
    const file = str(u32(entry + 4))
    let aux = entry + u32(entry + 8)
    for (let j = 0; j < u16(entry + 2); j++) {
      needed.push({ file, version: str(u32(aux + 8)) })
      aux += u32(aux + 12)
    }
    const next = u32(entry + 12)
    if (next === 0) break
    entry += next
  }
  return needed
}

/** `[2, 17]` for `GLIBC_2.17`; null for other version names (GLIBC_PRIVATE, GCC_3.0, ...). */
const glibcVersion = (name) => {
  const m = /^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$/.exec(name)
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : null
}
const compare = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]

/** The highest GLIBC_ version `file` needs, as `{ version, files }`, or null if none. */
function glibcFloor(file) {
  let best = null
  for (const { file: lib, version } of versionsNeeded(fs.readFileSync(file))) {
    const v = glibcVersion(version)
    if (!v) continue
    if (!best || compare(v, best.parsed) > 0) best = { version, parsed: v, files: new Set([lib]) }
    else if (compare(v, best.parsed) === 0) best.files.add(lib)
  }
  return best && { version: best.version, files: [...best.files].sort() }
}

module.exports = { versionsNeeded, glibcFloor, glibcVersion }

if (require.main === module) {
  const argv = process.argv.slice(2)
  let max = '2.17'
  const at = argv.indexOf('--max')
  if (at >= 0) max = argv.splice(at, 2)[1]
  const limit = glibcVersion(`GLIBC_${max}`)
  if (!limit || argv.length === 0) {
    console.error('usage: check-glibc.js [--max X.Y] FILE ...')
    process.exit(1)
  }
  let status = 0
  for (const file of argv) {
    try {
      const floor = glibcFloor(file)
      if (!floor) {
        console.log(`${file}: needs no GLIBC_ version`)
        continue
      }
      const over = compare(glibcVersion(floor.version), limit) > 0
      console.log(`${file}: needs ${floor.version} (from ${floor.files.join(', ')})${over ? `, newer than GLIBC_${max}` : ''}`)
      if (over) status = 1
    } catch (err) {
      console.error(`${file}: ${err.message}`)
      status = 1
    }
  }
  process.exitCode = status
}
