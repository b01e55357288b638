import { describe, expect, test } from "vitest"
import { duration, mib } from "./format"

describe("duration", () => {
  const cases: Record<string, [number, string]> = {
    "negative (a clock skew)": [-1, "—"],
    "not a number (a missing time)": [Number.NaN, "—"],
    "seconds, rounded": [59_400, "59s"],
    "minutes and seconds": [61_000, "1m 1s"],
    "hours and minutes": [3_660_000, "1h 1m"],
    "days and hours": [90_061_000, "1d 1h"],
  }
  for (const [name, [ms, text]] of Object.entries(cases)) test(name, () => expect(duration(ms)).toBe(text))
})

describe("mib", () => {
  const cases: Record<string, [number | undefined, string]> = {
    absent: [undefined, "—"],
    "under a GiB": [512, "512 MiB"],
    "whole GiB": [2048, "2 GiB"],
    "fractional GiB, one decimal": [1536, "1.5 GiB"],
  }
  for (const [name, [n, text]] of Object.entries(cases)) test(name, () => expect(mib(n)).toBe(text))
})
