// How times, durations and counts read on a page.

export function time(text) {
  if (!text) return "—";
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) return text;
  // ISO-like and in UTC, as the API gives it: lineage spans time zones.
  return date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$|Z$/, " UTC");
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function count(n) {
  return (n ?? 0).toLocaleString("en");
}

// Bytes in binary units (OutputStatistics `size` is bytes): 2097152 → "2.0 MiB".
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit ? `${value.toFixed(1)} ${units[unit]}` : `${n} B`;
}
