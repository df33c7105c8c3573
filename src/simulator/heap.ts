/** A binary min-heap: finds the next creation to finish in O(log n), however many are in flight. */
export class MinHeap<T> {
  private readonly items: T[] = [];
  constructor(private readonly priority: (item: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.priority(items[parent] as T) <= this.priority(item)) break;
      items[i] = items[parent] as T;
      i = parent;
    }
    items[i] = item;
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    let i = 0;
    const p = this.priority(last);
    for (;;) {
      const l = 2 * i + 1;
      if (l >= items.length) break;
      const r = l + 1;
      const child = r < items.length && this.priority(items[r] as T) < this.priority(items[l] as T) ? r : l;
      if (this.priority(items[child] as T) >= p) break;
      items[i] = items[child] as T;
      i = child;
    }
    items[i] = last;
    return top;
  }
}
