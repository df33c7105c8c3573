/**
 * The number of images a creation was asked for: `num_images` when it is a positive whole number, else 1 (the
 * service's default). The activities bound a creation's images by it; the result files show it.
 */
export function imagesAskedFor(numImages: unknown): number {
  return typeof numImages === 'number' && Number.isInteger(numImages) && numImages >= 1 ? numImages : 1;
}
